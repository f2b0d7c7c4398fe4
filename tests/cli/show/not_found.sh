driftscope show run.tdump encoder.layer.0.attn
