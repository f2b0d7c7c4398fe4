driftscope ls run.tdump --filter 'encoder.* -*.mlp'
