driftscope show multi.tdump embeddings
