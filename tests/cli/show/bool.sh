driftscope show run.tdump mask --limit 2
