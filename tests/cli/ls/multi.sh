driftscope ls multi.tdump
