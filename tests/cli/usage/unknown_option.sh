driftscope info --bogus run.tdump
