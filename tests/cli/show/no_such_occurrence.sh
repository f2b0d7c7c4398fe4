driftscope show multi.tdump encoder.layer.0 --occurrence 5
