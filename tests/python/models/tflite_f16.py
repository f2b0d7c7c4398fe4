"""The test CNN of tflite_models.py with float16 weights, as the TFLite converter writes a model
with float16 quantization (``optimizations=[DEFAULT]``, ``supported_types=[float16]``): every
weight and bias is stored as FLOAT16 and turned into float32 by a DEQUANTIZE op in front of the
CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED that reads it. The XNNPACK delegate folds those
DEQUANTIZE ops into the layers and never writes their float32 outputs (issue 24, item 4).

Activations keep the float model's names; the DEQUANTIZE outputs are named after the weights
(``conv1/weights``), the FLOAT16 constants ``conv1/weights_f16``."""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

import tflite_models as tm
from tflite_models import C1, C_IN, CLASSES, H, W

# The DEQUANTIZE outputs, in execution order.
DEQUANTIZED = ["conv1/weights", "conv1/bias", "dwconv/weights", "dwconv/bias", "fc/weights",
               "fc/bias"]


def build_f16_weights(w: Optional[Dict[str, np.ndarray]] = None) -> bytes:
    s = tm._schema()
    w = w or tm.weights()
    T, Op, Opt, Act = s.TensorType, s.BuiltinOperator, s.BuiltinOptions, s.ActivationFunctionType
    b = tm._Builder()

    def f16(name: str, value: np.ndarray) -> int:
        half = b.tensor(name + "_f16", value.shape, T.FLOAT16, value.astype(np.float16))
        out = b.tensor(name, value.shape, T.FLOAT32)
        b.op(Op.DEQUANTIZE, 2, [half], [out])
        return out

    x = b.tensor("input", [1, H, W, C_IN], T.FLOAT32)
    cw, cb = f16("conv1/weights", w["conv1.w"]), f16("conv1/bias", w["conv1.b"])
    c = b.tensor("conv1", [1, H, W, C1], T.FLOAT32)
    b.op(Op.CONV_2D, 1, [x, cw, cb], [c], Opt.Conv2DOptions, tm._conv_opts(1, Act.RELU))
    dw, db = f16("dwconv/weights", w["dwconv.w"]), f16("dwconv/bias", w["dwconv.b"])
    d = b.tensor("dwconv", [1, H // 2, W // 2, C1], T.FLOAT32)
    b.op(Op.DEPTHWISE_CONV_2D, 1, [c, dw, db], [d], Opt.DepthwiseConv2DOptions,
         tm._conv_opts(2, Act.RELU6, depthwise=True))
    p = b.tensor("pool", [1, 1, 1, C1], T.FLOAT32)
    b.op(Op.AVERAGE_POOL_2D, 1, [d], [p], Opt.Pool2DOptions, tm._pool_opts())
    shp = b.tensor("flatten/shape", [2], T.INT32, np.array([1, C1], np.int32))
    f = b.tensor("flatten", [1, C1], T.FLOAT32)
    b.op(Op.RESHAPE, 1, [p, shp], [f], Opt.ReshapeOptions, tm._reshape_opts())
    fw, fb = f16("fc/weights", w["fc.w"]), f16("fc/bias", w["fc.b"])
    lg = b.tensor("logits", [1, CLASSES], T.FLOAT32)
    b.op(Op.FULLY_CONNECTED, 1, [f, fw, fb], [lg], Opt.FullyConnectedOptions, tm._fc_opts())
    pr = b.tensor("probs", [1, CLASSES], T.FLOAT32)
    b.op(Op.SOFTMAX, 1, [lg], [pr], Opt.SoftmaxOptions, tm._softmax_opts())
    return b.finish([x], [pr], "driftscope test model (float16 weights behind DEQUANTIZE)")


def build_int8_io() -> bytes:
    """tflite_models.build_int8 as the converter writes it with ``inference_input_type`` and
    ``inference_output_type`` int8: the QUANTIZE and DEQUANTIZE at the boundary are gone, the
    model takes int8 ``input_q`` and returns int8 ``probs`` (scale 1/256, zero point -128)."""
    import flatbuffers

    s = tm._schema()
    m = s.ModelT.InitFromPackedBuf(tm.build_int8(), 0)
    sg = m.subgraphs[0]
    names = [t.name.decode() if isinstance(t.name, bytes) else t.name for t in sg.tensors]
    sg.operators = sg.operators[1:-1]
    sg.inputs, sg.outputs = [names.index("input_q")], [names.index("probs")]
    fb = flatbuffers.Builder(4096)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())
