driftscope check --help
