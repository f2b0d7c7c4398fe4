driftscope ls run.tdump --filter 'rank<<2'
