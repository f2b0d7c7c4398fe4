driftscope info corrupt.tdump
