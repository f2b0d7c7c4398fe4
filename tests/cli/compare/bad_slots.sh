driftscope compare run.tdump run.tdump --reference64 badslots.tdump > out.txt; echo "exit $?"
grep -c . out.txt > /dev/null && echo "report written"
