driftscope info acts.npz
