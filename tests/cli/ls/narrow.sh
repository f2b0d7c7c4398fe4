COLUMNS=72 driftscope ls multi.tdump
