driftscope info no-such.tdump
