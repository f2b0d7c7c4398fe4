driftscope verify badslots.tdump
