driftscope show multi.tdump embeddings --role weights
