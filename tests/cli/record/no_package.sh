DRIFTSCOPE_PYTHON=fakepy/nopackage driftscope record onnx model.onnx -o run.tdump
