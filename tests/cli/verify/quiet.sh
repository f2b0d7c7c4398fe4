driftscope verify -q corrupt.tdump || echo "exit $?"
