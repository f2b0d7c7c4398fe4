driftscope info unfinished.tdump
