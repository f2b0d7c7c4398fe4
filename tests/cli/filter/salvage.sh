driftscope filter --salvage corrupt.tdump fixed.tdump && driftscope verify fixed.tdump
