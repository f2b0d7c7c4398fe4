driftscope ls run.tdump --filter 'dtype=f16,bool'
