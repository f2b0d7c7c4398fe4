driftscope verify corrupt.tdump
