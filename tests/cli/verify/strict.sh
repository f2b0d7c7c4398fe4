driftscope verify --strict unfinished.tdump
