driftscope verify badindex.tdump
