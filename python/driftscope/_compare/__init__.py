"""Comparing dumps: the local engine and driftscope.compare() (api), the settings both engines
build (settings), the Ray engine (ray), `driftscope check` of one run (check) and the
`python -m driftscope compare` command (cli). Users call driftscope.compare and driftscope.check.
"""
