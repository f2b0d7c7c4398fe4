driftscope filter run.tdump ./run.tdump
