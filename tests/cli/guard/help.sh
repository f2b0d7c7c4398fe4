driftscope guard --help
