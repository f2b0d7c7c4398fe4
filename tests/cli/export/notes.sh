driftscope export multi.tdump m.npz
