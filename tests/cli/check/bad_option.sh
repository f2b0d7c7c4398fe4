driftscope check run.tdump --ignore deadchannels
