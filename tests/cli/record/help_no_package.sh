DRIFTSCOPE_PYTHON=fakepy/nopackage driftscope record --help
