driftscope verify run.tdump
