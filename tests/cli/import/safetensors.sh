driftscope import weights.safetensors w.tdump --salt 7 --meta backend=cpu && driftscope ls w.tdump && driftscope info w.tdump | tail -n 7
