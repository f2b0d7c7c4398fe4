driftscope show multi.tdump embeddings --role input
