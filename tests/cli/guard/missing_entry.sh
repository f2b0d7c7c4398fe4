# --model FILE.py:FUNCTION whose file does not exist.
driftscope guard --model no_such_file.py:build
