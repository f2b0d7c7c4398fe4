driftscope info cut.tdump
