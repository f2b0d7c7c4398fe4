driftscope check nothing_here.tdump
