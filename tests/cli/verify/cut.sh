driftscope verify cut.tdump
