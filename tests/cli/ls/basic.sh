driftscope ls run.tdump
