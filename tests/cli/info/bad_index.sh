driftscope info badindex.tdump | grep -E "^(finished|integrity)"
driftscope info badslots.tdump | grep -E "^(finished|integrity)"
driftscope verify badindex.tdump badslots.tdump
