driftscope check cut.tdump
