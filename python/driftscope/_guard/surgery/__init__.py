"""Model surgery shared by replay (driftscope._replay) and the guard's bisection: cut a model at
named tensors (the suffix that reads them as inputs), isolate one node, expose intermediates.
One module per source format (onnx.py)."""
