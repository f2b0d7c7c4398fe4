driftscope import acts.npz some.tdump --filter 'dtype=f32' --salt 1 && driftscope ls some.tdump --no-stats
