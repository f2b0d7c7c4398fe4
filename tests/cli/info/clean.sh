driftscope info run.tdump
