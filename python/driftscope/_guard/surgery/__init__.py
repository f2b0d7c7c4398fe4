"""Model surgery shared by replay (driftscope._replay) and the guard's bisection: cut a model at
named tensors (the prefix that yields them, the suffix that reads them as inputs), isolate one
op, expose intermediates. One module per source format (onnx.py, tflite.py)."""
