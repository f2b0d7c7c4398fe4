"""Small models for driftscope guard whose failures are real runtime behaviour, not mocks.

ONNX Runtime's CPU provider runs a float16 model in float32 behind inserted casts, except runs
of nodes that all have float16 kernels (Concat then Transpose: data movement). A value entering
such a run is stored as float16, so the models below put one there:

  overflow_onnx   x*1000*1000 (|v| ~ 1e6 > 65504) -> Concat -> Transpose -> *1e-3: the float16
                  store gives Inf, float32 gives values ~1e3           NUMERICAL_INSTABILITY
  vanish_onnx     x*1e-5*1e-5 (~1e-10, below float16's smallest subnormal 6e-8) -> Concat ->
                  Transpose -> *1e4*1e4*100: float16 gives zeros, float32 ~1   SILENT_ZERO_VECTOR
  constant_onnx   vanish_onnx then Softmax: float16 gives 1/16 everywhere     CONSTANT_OUTPUT
  outlier_onnx    x*mask @ W where W has one outlier weight and the rest ~0.01 and the mask makes
                  that row's input tiny: dynamic INT8 (one scale per tensor) rounds the other
                  weights to multiples of outlier/127: an outlier of 100 rounds them all to 0
                  (SILENT_ZERO_VECTOR), one of 1 leaves them coarse  PRECISION_DEGRADATION
  classifier_onnx logits [1, seq, 10] = x @ W: INT8 error is ~1%, enough to change the top-1
                  class at a few of many positions                        ARGMAX_FLIP
  stateful_storage_onnx  (state in, state out) big = (x + h_in) * 300 -> Concat -> Transpose
                  -> *1e-3 = y, h_out = big * 30: step 1 fits float16 (|big| < ~1500), step 2
                  takes h_in ~1e4 and stores |big| ~1e6 in float16: Inf at step 2 only
                                                                          NUMERICAL_INSTABILITY
  scaled_onnx     x*2 -> *3 -> +1 = y, and a copy whose second Mul is *(-3) and whose output is
                  named y_other (--reference-model: the two files pair outputs by position)
  fp16_torch      (PyTorch) a Linear whose outputs ~1e3 are squared and normalised: in float16
                  eager the squares overflow to Inf and Inf/Inf is NaN    NUMERICAL_INSTABILITY
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np


def save_model(path, nodes, inputs, outputs, inits=(), name: str = "g"):
    """An opset-17 ONNX model of these nodes saved at `path` (the tests' one way to write one).
    inits: TensorProtos, or a dict name -> numpy array."""
    import onnx
    from onnx import helper, numpy_helper

    if isinstance(inits, dict):
        inits = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return model


def _save(path, nodes, inits, in_shape, name: str) -> None:
    from onnx import TensorProto, helper

    save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, name)


def _chain(before: Sequence[float], after: Sequence[float], tail: List[str]):
    from onnx import helper, numpy_helper

    nodes, inits, prev = [], [], "x"

    def mul(value: str, c: float, tag: str) -> str:
        k = len(inits)
        inits.append(numpy_helper.from_array(np.array(c, np.float32), f"c{k}"))
        out = f"{tag}{k}"
        nodes.append(helper.make_node("Mul", [value, f"c{k}"], [out], name=f"/{tag}{k}/Mul"))
        return out

    for c in before:
        prev = mul(prev, c, "pre")
    nodes.append(helper.make_node("Concat", [prev, prev], ["cat"], axis=1, name="/store/Concat"))
    nodes.append(helper.make_node("Transpose", ["cat"], ["t"], perm=[1, 0],
                                  name="/store/Transpose"))
    prev = "t"
    for c in after:
        prev = mul(prev, c, "post")
    for op in tail:
        nodes.append(helper.make_node(op, [prev], [f"{op.lower()}_out"], name=f"/head/{op}",
                                      **({"axis": 0} if op == "Softmax" else {})))
        prev = f"{op.lower()}_out"
    nodes[-1].output[0] = "y"
    return nodes, inits


def overflow_onnx(path, before: Sequence[float] = (1000.0, 1000.0)) -> None:
    nodes, inits = _chain(before, [1e-3], [])
    _save(path, nodes, inits, [1, 8], "overflow")


def vanish_onnx(path) -> None:
    nodes, inits = _chain([1e-5, 1e-5], [1e4, 1e4, 100.0], [])
    _save(path, nodes, inits, [1, 8], "vanish")


def constant_onnx(path) -> None:
    nodes, inits = _chain([1e-5, 1e-5], [1e4, 1e4, 100.0], ["Softmax"])
    _save(path, nodes, inits, [1, 8], "constant")


def outlier_onnx(path, outlier: float = 100.0, exporter_names: bool = False) -> None:
    """exporter_names: values named as torch.onnx.export names them ("/mask/Mul_output_0"), so
    the quantization node quantize_dynamic adds for it ("/mask/Mul_output_0_QuantizeLinear")
    lands in the scope of module "mask"."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((64, 64)) * 0.01).astype(np.float32)
    w[0, 0] = outlier
    mask = np.ones((64,), np.float32)
    mask[0] = 1e-4
    xm = "/mask/Mul_output_0" if exporter_names else "xm"
    nodes = [helper.make_node("Mul", ["x", "mask"], [xm], name="/mask/Mul"),
             helper.make_node("MatMul", [xm, "w"], ["y"], name="/proj/MatMul")]
    _save(path, nodes, [numpy_helper.from_array(mask, "mask"), numpy_helper.from_array(w, "w")],
          [1, 64], "outlier")


def embedding_onnx(path) -> None:
    """ids [batch, seq] -> Gather over a 50-row table -> * mask: the guard's input rules."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(2).standard_normal((50, 4)).astype(np.float32)
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64, name="/cast"),
             helper.make_node("Gather", ["table", "ids64"], ["emb"], name="/embed/Gather"),
             helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT, name="/mcast"),
             helper.make_node("Unsqueeze", ["maskf", "axes"], ["mask3"], name="/unsq"),
             helper.make_node("Mul", ["emb", "mask3"], ["y"], name="/masked/Mul")]
    graph = helper.make_graph(
        nodes, "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", "seq"]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(table, "table"),
         numpy_helper.from_array(np.array([2], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def stateful_storage_onnx(path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = {"c300": 300.0, "c30": 30.0, "cmilli": 1e-3}
    nodes = [helper.make_node("Add", ["x", "h_in"], ["s"], name="/cell/Add"),
             helper.make_node("Mul", ["s", "c300"], ["big"], name="/cell/Mul"),
             helper.make_node("Concat", ["big", "big"], ["cat"], axis=1, name="/store/Concat"),
             helper.make_node("Transpose", ["cat"], ["t"], perm=[1, 0], name="/store/Transpose"),
             helper.make_node("Mul", ["t", "cmilli"], ["y"], name="/head/Mul"),
             helper.make_node("Mul", ["big", "c30"], ["h_out"], name="/state/Mul")]
    graph = helper.make_graph(
        nodes, "stateful_storage",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 1]),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in c.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def scaled_onnx(path, second: float = 3.0, output: str = "y") -> None:
    from onnx import helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(v, np.float32), k)
             for k, v in (("two", 2.0), ("second", second), ("one", 1.0))]
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"], name="/first/Mul"),
             helper.make_node("Mul", ["a", "second"], ["b"], name="/second/Mul"),
             helper.make_node("Add", ["b", "one"], ["y"], name="/last/Add")]
    _save(path, nodes, inits, [1, 8], "scaled")
    if output != "y":
        import onnx

        m = onnx.load(str(path))
        m.graph.node[-1].output[0] = output
        m.graph.output[0].name = output
        onnx.save(m, str(path))


def classifier_onnx(path) -> None:
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(9)
    w = rng.standard_normal((64, 10)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="/classifier/MatMul")]
    _save(path, nodes, [numpy_helper.from_array(w, "w")], [1, "seq", 64], "classifier")


FP16_TORCH = '''
import torch


class Energy(torch.nn.Module):
    """Squared activations, normalised: fine in float32, Inf/Inf = NaN in float16."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 16)
        with torch.no_grad():
            self.proj.weight.mul_(300.0)

    def forward(self, x):
        h = self.proj(x)
        e = h * h
        return e / e.sum(dim=-1, keepdim=True)


def build():
    return Energy(), torch.randn(2, 8)
'''


def fp16_torch(path) -> None:
    with open(path, "w") as f:
        f.write(FP16_TORCH)
