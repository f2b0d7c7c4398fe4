"""The recorders: PyTorch (``torch``), ONNX Runtime (``onnxruntime``) and LiteRT (``litert``),
with what they share (``dataflow``, ``naming``, ``torch_sets``). Users reach them at their public
paths ``driftscope.torch``, ``driftscope.onnxruntime`` and ``driftscope.litert``; the rest of the
package (the guard, the references) through ``driftscope.recorders.api`` only.

Importing this package imports no recorder and no framework.
"""
