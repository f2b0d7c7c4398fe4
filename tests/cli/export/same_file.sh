driftscope export run.tdump run.tdump
