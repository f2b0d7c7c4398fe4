driftscope show run.tdump big --limit 100
