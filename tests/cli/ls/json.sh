driftscope ls multi.tdump --json --filter 'embeddings'
