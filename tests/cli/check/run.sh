driftscope check run.tdump
