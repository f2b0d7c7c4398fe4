# A threshold out of its range is a usage error before anything runs.
driftscope guard --model net.py:build --min-cosine 1.5
