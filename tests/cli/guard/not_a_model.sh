# A dump given where a model belongs: the suffix says what guard runs.
driftscope guard run.tdump
