driftscope show multi.tdump encoder.layer.1
