"""A .tflite INT8 model with a fault planted in one op that only XNNPACK shows (issue 27).

    input float32[1,16] -> QUANTIZE -> fc1 -> fc2 -> coarse -> planted -> fc5 -> fc6 -> DEQUANTIZE

Every op is an INT8 FULLY_CONNECTED with per-tensor weights. `coarse` leaves values of a few
units (output scale 0.5); `planted` (identity weights, weight scale 1/128, output scale 1/128)
requantizes with a multiplier of exactly 0.5, so every odd accumulator is a tie. LiteRT's
reference kernels round ties with their fixed-point multiplier (0.5 -> 1, -1.5 -> -1), XNNPACK
with float arithmetic to even (0.5 -> 0, -1.5 -> -2): on values of one or two units that is a
relative error near 0.3 at `planted`, carried to the output (cosine about 0.9 on the guard's
inputs). The other ops' multipliers are not ties and agree between the two kernels."""

from __future__ import annotations

import numpy as np

import tflite_models as tm

N = 16
OPS = ["input_q", "fc1", "fc2", "coarse", "planted", "fc5", "fc6", "out"]


def build(stateful: bool = False) -> bytes:
    """`stateful`: the input first goes through a streaming prelude as converted keyword
    spotters have one (CALL_ONCE of an init subgraph, VAR_HANDLE, READ_VARIABLE, ADD of the
    state, ASSIGN_VARIABLE of the sum): operators .tflite surgery refuses, before the fault."""
    s = tm._schema()
    T, Op, Opt = s.TensorType, s.BuiltinOperator, s.BuiltinOptions
    b = tm._Builder()
    rng = np.random.default_rng(5)
    x = b.tensor("input", [1, N], T.FLOAT32)
    init = tm._Builder()
    if stateful:
        init.buffers, init.opcodes, init.opcode_index = b.buffers, b.opcodes, b.opcode_index
        once = s.CallOnceOptionsT()
        once.initSubgraphIndex = 1
        b.op(Op.CALL_ONCE, 1, [], [], Opt.CallOnceOptions, once)
        handle = s.VarHandleOptionsT()
        handle.sharedName = "state"
        h0 = init.tensor("init/handle", [], T.RESOURCE)
        v0 = init.tensor("init/value", [1, N], T.FLOAT32, np.zeros((1, N), np.float32))
        init.op(Op.VAR_HANDLE, 1, [], [h0], Opt.VarHandleOptions, handle)
        init.op(Op.ASSIGN_VARIABLE, 1, [h0, v0], [])
        h = b.tensor("state/handle", [], T.RESOURCE)
        b.op(Op.VAR_HANDLE, 1, [], [h], Opt.VarHandleOptions, handle)
        r = b.tensor("state/read", [1, N], T.FLOAT32)
        b.op(Op.READ_VARIABLE, 1, [h], [r])
        mixed = b.tensor("mixed", [1, N], T.FLOAT32)
        b.op(Op.ADD, 1, [x, r], [mixed], Opt.AddOptions, s.AddOptionsT())
        b.op(Op.ASSIGN_VARIABLE, 1, [h, mixed], [])
        x = mixed
    cur = b.tensor("input_q", [1, N], T.INT8, scale=1 / 64, zero_point=0)
    b.op(Op.QUANTIZE, 1, [x], [cur])
    s_in = 1 / 64

    def fc(name: str, w: np.ndarray, s_out: float, s_w: float = 0.0) -> None:
        nonlocal cur, s_in
        s_w = s_w or float(np.max(np.abs(w))) / 127
        wq = np.clip(np.round(w / s_w), -127, 127).astype(np.int8)
        wt = b.tensor(f"{name}/weights", [N, N], T.INT8, wq, scale=s_w, zero_point=0)
        bt = b.tensor(f"{name}/bias", [N], T.INT32, np.zeros(N, np.int32), scale=s_in * s_w,
                      zero_point=0)
        y = b.tensor(name, [1, N], T.INT8, scale=s_out, zero_point=0)
        o = s.FullyConnectedOptionsT()
        b.op(Op.FULLY_CONNECTED, 9, [cur, wt, bt], [y], Opt.FullyConnectedOptions, o)
        cur, s_in = y, s_out

    fc("fc1", rng.normal(0, 0.3, (N, N)), 0.03)
    fc("fc2", rng.normal(0, 0.3, (N, N)), 0.03)
    fc("coarse", rng.normal(0, 0.3, (N, N)), 0.5)
    fc("planted", np.eye(N) / 128, 1 / 128, s_w=1 / 128)
    fc("fc5", rng.normal(0, 0.3, (N, N)), 0.0004)
    fc("fc6", rng.normal(0, 0.3, (N, N)), 0.0004)
    out = b.tensor("out", [1, N], T.FLOAT32)
    b.op(Op.DEQUANTIZE, 2, [cur], [out])
    data = b.finish([0], [out], "driftscope test model (int8, a tie-rounding fault planted in "
                                "one op)")
    if not stateful:
        return data
    import flatbuffers

    m = s.ModelT.InitFromPackedBuf(data, 0)
    g = s.SubGraphT()
    g.tensors, g.operators, g.name = init.tensors, init.operators, "init"
    g.inputs, g.outputs = [], []
    m.subgraphs.append(g)
    m.operatorCodes = b.opcodes
    fb = flatbuffers.Builder(4096)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())
