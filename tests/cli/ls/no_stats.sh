driftscope ls multi.tdump --no-stats
