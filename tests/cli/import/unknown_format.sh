echo "hello" > notes.txt; driftscope import notes.txt out.tdump
