driftscope info --json multi.tdump
