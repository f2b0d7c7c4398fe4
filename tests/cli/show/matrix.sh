driftscope show run.tdump encoder.layers.0.attn
