driftscope verify run.tdump multi.tdump cut.tdump
