DRIFTSCOPE_PYTHON=/nonexistent/python3 driftscope record onnx model.onnx -o run.tdump
