driftscope verify acts.npz
