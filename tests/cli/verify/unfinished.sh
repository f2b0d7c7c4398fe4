driftscope verify unfinished.tdump
