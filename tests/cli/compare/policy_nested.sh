# Issue 7 bug 3: inline tables nested 100,000 deep (the depth limit used to reset inside them).
python3 -c "import sys; n = 100000; sys.stdout.write('x = ' + '{a=' * n + '1' + '}' * n + '\n')" > deep.toml
driftscope compare run.tdump run.tdump --policy deep.toml
