"""Small LiteRT (TFLite) models written directly as flatbuffers, for the LiteRT recorder tests.

No converter is needed: the model is assembled with the flatbuffer object API that ai-edge-litert
ships (``ai_edge_litert.schema_py_generated``), the same schema every .tflite file follows.

Network (NHWC, as TFLite lays out images):

    input [1,16,16,3] -> CONV_2D 3x3 (8 filters, SAME, ReLU)  "conv1"    [1,16,16,8]
                      -> DEPTHWISE_CONV_2D 3x3 /2 (ReLU6)    "dwconv"   [1,8,8,8]
                      -> AVERAGE_POOL_2D 8x8                 "pool"     [1,1,1,8]
                      -> RESHAPE                             "flatten"  [1,8]
                      -> FULLY_CONNECTED 8->10               "logits"   [1,10]
                      -> SOFTMAX                             "probs"    [1,10]

``build_int8`` quantizes the same weights the way the TFLite converter does for full-integer
models: activations int8 asymmetric per tensor (calibrated on sample inputs), conv and depthwise
weights int8 symmetric per output channel, biases int32 with scale = input scale x weight scale,
softmax output at scale 1/256 and zero point -128, QUANTIZE/DEQUANTIZE at the float boundary.
The quantized activations keep the float model's names, so the two dumps compare name by name.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

H = W = 16
C_IN = 3
C1 = 8
CLASSES = 10


def weights(seed: int = 7) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "conv1.w": (rng.standard_normal((C1, 3, 3, C_IN)) * 0.4).astype(np.float32),   # OHWI
        "conv1.b": (rng.standard_normal(C1) * 0.1).astype(np.float32),
        "dwconv.w": (rng.standard_normal((1, 3, 3, C1)) * 0.5).astype(np.float32),    # 1HWC
        "dwconv.b": (rng.standard_normal(C1) * 0.1).astype(np.float32),
        "fc.w": (rng.standard_normal((CLASSES, C1)) * 0.6).astype(np.float32),         # [out, in]
        "fc.b": (rng.standard_normal(CLASSES) * 0.1).astype(np.float32),
    }


def sample_input(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (1, H, W, C_IN)).astype(np.float32)


def _schema():
    from ai_edge_litert import schema_py_generated as s

    return s


class _Builder:
    def __init__(self) -> None:
        s = _schema()
        self.s = s
        self.tensors: List = []
        self.buffers: List = [s.BufferT()]  # buffer 0 is the empty sentinel every model has
        self.opcodes: List = []
        self.opcode_index: Dict[Tuple[int, int], int] = {}
        self.operators: List = []

    def tensor(self, name: str, shape: Sequence[int], ttype: int,
               data: Optional[np.ndarray] = None, scale=None, zero_point=None,
               axis: int = 0) -> int:
        s = self.s
        t = s.TensorT()
        t.name = name
        t.shape = list(shape)
        t.type = ttype
        t.buffer = 0
        if data is not None:
            b = s.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = s.QuantizationParametersT()
            q.scale = [float(x) for x in np.atleast_1d(scale)]
            q.zeroPoint = [int(x) for x in np.atleast_1d(zero_point)]
            q.quantizedDimension = axis
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def op(self, code: int, version: int, inputs: Sequence[int], outputs: Sequence[int],
           options_type: int = 0, options=None) -> None:
        s = self.s
        key = (code, version)
        if key not in self.opcode_index:
            oc = s.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)  # the int8 field older readers use
            oc.version = version
            self.opcodes.append(oc)
            self.opcode_index[key] = len(self.opcodes) - 1
        o = s.OperatorT()
        o.opcodeIndex = self.opcode_index[key]
        o.inputs = list(inputs)
        o.outputs = list(outputs)
        o.builtinOptionsType = options_type
        o.builtinOptions = options
        self.operators.append(o)

    def finish(self, inputs: Sequence[int], outputs: Sequence[int], description: str,
               signature: Optional[Tuple[str, Sequence[str], Sequence[str]]] = None) -> bytes:
        """`signature`: (key, input names, output names) for a SignatureDef, as the converter
        writes one ("serving_default", names of the Keras inputs and outputs)."""
        import flatbuffers

        s = self.s
        sg = s.SubGraphT()
        sg.tensors = self.tensors
        sg.inputs = list(inputs)
        sg.outputs = list(outputs)
        sg.operators = self.operators
        sg.name = "main"
        m = s.ModelT()
        m.version = 3
        m.operatorCodes = self.opcodes
        m.subgraphs = [sg]
        m.description = description
        m.buffers = self.buffers
        if signature is not None:
            key, in_names, out_names = signature

            def tensor_map(name: str, index: int):
                t = s.TensorMapT()
                t.name = name
                t.tensorIndex = index
                return t

            sd = s.SignatureDefT()
            sd.signatureKey = key
            sd.subgraphIndex = 0
            sd.inputs = [tensor_map(n, i) for n, i in zip(in_names, inputs)]
            sd.outputs = [tensor_map(n, i) for n, i in zip(out_names, outputs)]
            m.signatureDefs = [sd]
        fb = flatbuffers.Builder(4096)
        fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
        return bytes(fb.Output())


def _conv_opts(stride: int, act: int, depthwise: bool = False):
    s = _schema()
    o = s.DepthwiseConv2DOptionsT() if depthwise else s.Conv2DOptionsT()
    o.padding = s.Padding.SAME
    o.strideW = o.strideH = stride
    o.fusedActivationFunction = act
    o.dilationWFactor = o.dilationHFactor = 1
    if depthwise:
        o.depthMultiplier = 1
    return o


def _pool_opts():
    s = _schema()
    o = s.Pool2DOptionsT()
    o.padding = s.Padding.VALID
    o.strideW = o.strideH = 8
    o.filterWidth = o.filterHeight = 8
    o.fusedActivationFunction = s.ActivationFunctionType.NONE
    return o


def _fc_opts():
    s = _schema()
    o = s.FullyConnectedOptionsT()
    o.fusedActivationFunction = s.ActivationFunctionType.NONE
    return o


def _softmax_opts():
    s = _schema()
    o = s.SoftmaxOptionsT()
    o.beta = 1.0
    return o


def _reshape_opts():
    s = _schema()
    o = s.ReshapeOptionsT()
    o.newShape = [1, C1]
    return o


def build_float(w: Optional[Dict[str, np.ndarray]] = None) -> bytes:
    s = _schema()
    w = w or weights()
    T, Op, Opt, Act = s.TensorType, s.BuiltinOperator, s.BuiltinOptions, s.ActivationFunctionType
    b = _Builder()
    x = b.tensor("input", [1, H, W, C_IN], T.FLOAT32)
    cw = b.tensor("conv1/weights", w["conv1.w"].shape, T.FLOAT32, w["conv1.w"])
    cb = b.tensor("conv1/bias", [C1], T.FLOAT32, w["conv1.b"])
    c = b.tensor("conv1", [1, H, W, C1], T.FLOAT32)
    b.op(Op.CONV_2D, 1, [x, cw, cb], [c], Opt.Conv2DOptions, _conv_opts(1, Act.RELU))
    dw = b.tensor("dwconv/weights", w["dwconv.w"].shape, T.FLOAT32, w["dwconv.w"])
    db = b.tensor("dwconv/bias", [C1], T.FLOAT32, w["dwconv.b"])
    d = b.tensor("dwconv", [1, H // 2, W // 2, C1], T.FLOAT32)
    b.op(Op.DEPTHWISE_CONV_2D, 1, [c, dw, db], [d], Opt.DepthwiseConv2DOptions,
         _conv_opts(2, Act.RELU6, depthwise=True))
    p = b.tensor("pool", [1, 1, 1, C1], T.FLOAT32)
    b.op(Op.AVERAGE_POOL_2D, 1, [d], [p], Opt.Pool2DOptions, _pool_opts())
    shp = b.tensor("flatten/shape", [2], T.INT32, np.array([1, C1], np.int32))
    f = b.tensor("flatten", [1, C1], T.FLOAT32)
    b.op(Op.RESHAPE, 1, [p, shp], [f], Opt.ReshapeOptions, _reshape_opts())
    fw = b.tensor("fc/weights", [CLASSES, C1], T.FLOAT32, w["fc.w"])
    fb = b.tensor("fc/bias", [CLASSES], T.FLOAT32, w["fc.b"])
    lg = b.tensor("logits", [1, CLASSES], T.FLOAT32)
    b.op(Op.FULLY_CONNECTED, 1, [f, fw, fb], [lg], Opt.FullyConnectedOptions, _fc_opts())
    pr = b.tensor("probs", [1, CLASSES], T.FLOAT32)
    b.op(Op.SOFTMAX, 1, [lg], [pr], Opt.SoftmaxOptions, _softmax_opts())
    return b.finish([x], [pr], "driftscope test model (float32)",
                    signature=("serving_default", ["image"], ["probabilities"]))


def _activation_ranges(float_model: bytes, samples: Sequence[np.ndarray]) -> Dict[str, Tuple[float, float]]:
    """min/max of every activation over `samples`, read from the float model's own run."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=float_model, experimental_preserve_all_tensors=True,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    names = {"input", "conv1", "dwconv", "pool", "flatten", "logits"}
    ranges: Dict[str, Tuple[float, float]] = {}
    details = {d["name"]: d["index"] for d in it.get_tensor_details()}
    for x in samples:
        it.set_tensor(details["input"], x)
        it.invoke()
        for n in names:
            v = it.get_tensor(details[n])
            lo, hi = ranges.get(n, (0.0, 0.0))  # ranges always include 0 (exact zero point)
            ranges[n] = (min(lo, float(v.min())), max(hi, float(v.max())))
    return ranges


def _asym(lo: float, hi: float) -> Tuple[float, int]:
    """int8 affine parameters covering [lo, hi] (which contains 0): q = round(x/scale) + zp."""
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return scale, zp


def _sym_per_channel(wt: np.ndarray, axis: int) -> Tuple[np.ndarray, np.ndarray]:
    moved = np.moveaxis(wt, axis, 0).reshape(wt.shape[axis], -1)
    scales = np.maximum(np.abs(moved).max(axis=1), 1e-8) / 127.0
    shape = [1] * wt.ndim
    shape[axis] = -1
    q = np.clip(np.round(wt / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales.astype(np.float64)


def build_int8(w: Optional[Dict[str, np.ndarray]] = None,
               calibration: Optional[Sequence[np.ndarray]] = None) -> bytes:
    s = _schema()
    w = w or weights()
    samples = calibration if calibration is not None else [sample_input(k) for k in range(8)]
    ranges = _activation_ranges(build_float(w), samples)
    T, Op, Opt, Act = s.TensorType, s.BuiltinOperator, s.BuiltinOptions, s.ActivationFunctionType
    b = _Builder()

    x = b.tensor("input", [1, H, W, C_IN], T.FLOAT32)
    s_in, z_in = _asym(*ranges["input"])
    xq = b.tensor("input_q", [1, H, W, C_IN], T.INT8, scale=s_in, zero_point=z_in)
    b.op(Op.QUANTIZE, 1, [x], [xq])

    cq, cs = _sym_per_channel(w["conv1.w"], 0)
    cw = b.tensor("conv1/weights", cq.shape, T.INT8, cq, scale=cs, zero_point=np.zeros(C1), axis=0)
    cbs = s_in * cs
    cb = b.tensor("conv1/bias", [C1], T.INT32,
                  np.round(w["conv1.b"] / cbs).astype(np.int32), scale=cbs,
                  zero_point=np.zeros(C1), axis=0)
    s_c, z_c = _asym(*ranges["conv1"])
    c = b.tensor("conv1", [1, H, W, C1], T.INT8, scale=s_c, zero_point=z_c)
    b.op(Op.CONV_2D, 3, [xq, cw, cb], [c], Opt.Conv2DOptions, _conv_opts(1, Act.RELU))

    dq, ds = _sym_per_channel(w["dwconv.w"], 3)
    dw = b.tensor("dwconv/weights", dq.shape, T.INT8, dq, scale=ds, zero_point=np.zeros(C1), axis=3)
    dbs = s_c * ds
    db = b.tensor("dwconv/bias", [C1], T.INT32,
                  np.round(w["dwconv.b"] / dbs).astype(np.int32), scale=dbs,
                  zero_point=np.zeros(C1), axis=0)
    s_d, z_d = _asym(*ranges["dwconv"])
    d = b.tensor("dwconv", [1, H // 2, W // 2, C1], T.INT8, scale=s_d, zero_point=z_d)
    b.op(Op.DEPTHWISE_CONV_2D, 3, [c, dw, db], [d], Opt.DepthwiseConv2DOptions,
         _conv_opts(2, Act.RELU6, depthwise=True))

    # Average pooling and reshape keep their input's quantization (a TFLite requirement).
    p = b.tensor("pool", [1, 1, 1, C1], T.INT8, scale=s_d, zero_point=z_d)
    b.op(Op.AVERAGE_POOL_2D, 2, [d], [p], Opt.Pool2DOptions, _pool_opts())
    shp = b.tensor("flatten/shape", [2], T.INT32, np.array([1, C1], np.int32))
    f = b.tensor("flatten", [1, C1], T.INT8, scale=s_d, zero_point=z_d)
    b.op(Op.RESHAPE, 1, [p, shp], [f], Opt.ReshapeOptions, _reshape_opts())

    fq, fs = _sym_per_channel(w["fc.w"].reshape(1, -1), 0)  # one scale for the whole matrix
    fq = fq.reshape(CLASSES, C1)
    fw = b.tensor("fc/weights", [CLASSES, C1], T.INT8, fq, scale=fs, zero_point=[0])
    fbs = float(s_d * fs[0])
    fb = b.tensor("fc/bias", [CLASSES], T.INT32, np.round(w["fc.b"] / fbs).astype(np.int32),
                  scale=fbs, zero_point=[0])
    s_l, z_l = _asym(*ranges["logits"])
    lg = b.tensor("logits", [1, CLASSES], T.INT8, scale=s_l, zero_point=z_l)
    b.op(Op.FULLY_CONNECTED, 4, [f, fw, fb], [lg], Opt.FullyConnectedOptions, _fc_opts())

    pr = b.tensor("probs", [1, CLASSES], T.INT8, scale=1.0 / 256.0, zero_point=-128)
    b.op(Op.SOFTMAX, 2, [lg], [pr], Opt.SoftmaxOptions, _softmax_opts())
    out = b.tensor("probs_float", [1, CLASSES], T.FLOAT32)
    b.op(Op.DEQUANTIZE, 2, [pr], [out])
    return b.finish([x], [out], "driftscope test model (int8, per-channel weights)")


def reference_forward(x: np.ndarray, w: Optional[Dict[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
    """The float network in numpy (float64), an independent check of the model the builder wrote."""
    w = w or weights()
    x = x.astype(np.float64)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    conv = np.zeros((1, H, W, C1))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nhwc,oc->nhwo", xp[:, i:i + H, j:j + W, :], w["conv1.w"][:, i, j, :])
    conv = np.maximum(conv + w["conv1.b"], 0.0)
    # SAME padding with stride 2 on 16: output 8, total pad 1, placed after (TF convention).
    cp = np.pad(conv, ((0, 0), (0, 1), (0, 1), (0, 0)))
    dw = np.zeros((1, H // 2, W // 2, C1))
    for i in range(3):
        for j in range(3):
            dw += cp[:, i:i + H:2, j:j + W:2, :] * w["dwconv.w"][0, i, j, :]
    dw = np.clip(dw + w["dwconv.b"], 0.0, 6.0)
    pool = dw.mean(axis=(1, 2), keepdims=True)
    flat = pool.reshape(1, C1)
    logits = flat @ w["fc.w"].T.astype(np.float64) + w["fc.b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return {"conv1": conv, "dwconv": dw, "pool": pool, "flatten": flat, "logits": logits,
            "probs": e / e.sum(axis=1, keepdims=True)}


STATE = 4


def build_stateful(variables: int = 3) -> bytes:
    """A streaming model that keeps its state in resource variables, as converted streaming
    keyword-spotting models do: an init subgraph (run once by CALL_ONCE) creates each variable
    with VAR_HANDLE and sets it with ASSIGN_VARIABLE; the main subgraph reads each one
    (READ_VARIABLE), adds it to the running value, and writes the sum back.

        input [1,4] -> + state0 -> "add0" -> + state1 -> "add1" -> ... -> "out" = last add * 2

    The VAR_HANDLE outputs are RESOURCE tensors holding a resource id; LiteRT's Python
    get_tensor decodes them as string tensors, which crashes once an id is 2 or more (issue 7,
    bug 17). Variable k starts at k+1 (all elements)."""
    s = _schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    init = _Builder()
    main = _Builder()
    main.buffers, main.opcodes, main.opcode_index = init.buffers, init.opcodes, init.opcode_index

    def handle_options(k: int):
        o = s.VarHandleOptionsT()
        o.sharedName = f"state{k}"
        return o

    x = main.tensor("input", [1, STATE], T.FLOAT32)
    once = s.CallOnceOptionsT()
    once.initSubgraphIndex = 1
    main.op(Op.CALL_ONCE, 1, [], [], Opt.CallOnceOptions, once)
    cur = x
    for k in range(variables):
        h0 = init.tensor(f"init/state{k}/handle", [], T.RESOURCE)
        v0 = init.tensor(f"init/state{k}/value", [1, STATE], T.FLOAT32,
                         np.full((1, STATE), k + 1, np.float32))
        init.op(Op.VAR_HANDLE, 1, [], [h0], Opt.VarHandleOptions, handle_options(k))
        init.op(Op.ASSIGN_VARIABLE, 1, [h0, v0], [])
        h = main.tensor(f"state{k}/handle", [], T.RESOURCE)
        main.op(Op.VAR_HANDLE, 1, [], [h], Opt.VarHandleOptions, handle_options(k))
        r = main.tensor(f"state{k}/read", [1, STATE], T.FLOAT32)
        main.op(Op.READ_VARIABLE, 1, [h], [r])
        y = main.tensor(f"add{k}", [1, STATE], T.FLOAT32)
        main.op(Op.ADD, 1, [cur, r], [y], Opt.AddOptions, s.AddOptionsT())
        main.op(Op.ASSIGN_VARIABLE, 1, [h, y], [])
        cur = y
    out = main.tensor("out", [1, STATE], T.FLOAT32)
    main.op(Op.ADD, 1, [cur, cur], [out], Opt.AddOptions, s.AddOptionsT())

    def subgraph(b: _Builder, inputs, outputs, name: str):
        g = s.SubGraphT()
        g.tensors, g.operators, g.inputs, g.outputs, g.name = (
            b.tensors, b.operators, list(inputs), list(outputs), name)
        return g

    m = s.ModelT()
    m.version = 3
    m.operatorCodes = main.opcodes
    m.subgraphs = [subgraph(main, [x], [out], "main"), subgraph(init, [], [], "init")]
    m.description = "driftscope test model (state in resource variables)"
    m.buffers = main.buffers
    import flatbuffers

    fb = flatbuffers.Builder(4096)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())
