COLUMNS=40 driftscope show run.tdump big --limit 600 | sed -n 14,19p
