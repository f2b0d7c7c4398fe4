driftscope filter run.tdump out.tdump --filter 'dtype=f33'
