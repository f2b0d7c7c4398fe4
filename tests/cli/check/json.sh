driftscope check --json - run.tdump
