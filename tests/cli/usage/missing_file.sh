driftscope ls
