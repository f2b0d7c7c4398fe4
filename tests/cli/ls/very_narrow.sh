COLUMNS=40 driftscope ls multi.tdump
