driftscope check acts.npz
