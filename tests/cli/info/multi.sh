driftscope info multi.tdump
