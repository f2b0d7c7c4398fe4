driftscope ls cut.tdump
