driftscope import acts.npz out.tdump --meta novalue
