driftscope filter run.tdump enc.tdump --filter 'encoder.*' && driftscope ls enc.tdump --no-stats
