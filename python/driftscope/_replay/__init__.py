"""Replay: put the reference's value back at a tensor and re-run the rest on the candidate
(issue 26; docs/howto/replay.md). Causal answers to what compare and the guard's probe read off
two dumps: is this op really the cause (output replay), does it make the error itself or inherit
it (op replay, the isolation scan), how much of each output's error is each origin's
(attribution), and a repro bundle a runtime's maintainers can run without the weights.

Layers: mechanism.py is the interface every model family implements (torch.py: forward hooks;
onnx.py: graph surgery run on the guard's ONNX backends; tflite.py: flatbuffer surgery on LiteRT);
the analyses above it (core / attribution / isolation / repro) see only that interface; cli.py
is `driftscope replay` and `driftscope repro`.
"""
