driftscope filter cut.tdump fixed.tdump && driftscope verify fixed.tdump
