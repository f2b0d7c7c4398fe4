driftscope filter run.tdump small.tdump --filter 'budget=100' && driftscope ls small.tdump --no-stats
