"""Small transformer-shaped LiteRT models, written as flatbuffers (tflite_models._Builder), for the
axis names that flow through .tflite graphs (issue 29, tests/python/test_axes_litert.py).

Normalisations are decomposed the way converters write them (MEAN, SQUARED_DIFFERENCE, RSQRT,
SUB, MUL); softmax is TFLite's, over the last axis only, so a softmax over another axis is
written with TRANSPOSEs around it.

* ``transposed_norm(seq, hidden, fixed)``: x [2,S,H] -> FULLY_CONNECTED -> TRANSPOSE -> layer norm
  over the last axis -> TRANSPOSE back: normalises each feature over the tokens (the bug); fixed:
  the same norm over hidden, no transposes.
* ``attention(wrong_softmax)``: one head, scores = q @ k^T (BATCH_MATMUL adj_y), softmax over
  the key axis, or over the query axis (TRANSPOSE, SOFTMAX, TRANSPOSE).
* ``encoder()``: input_ids and attention_mask (signature names; tensors named
  ``serving_default_input_ids:0`` as the converter does) -> embedding GATHER -> layer norm ->
  2-head self-attention (RESHAPE/TRANSPOSE heads split, mask added to the scores) -> output
  projection + residual -> layer norm -> GELU MLP + residual -> RMS norm -> mean over seq ->
  classifier -> softmax.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from tflite_models import _Builder, _schema


class _Net:
    """_Builder plus the ops these models use, each returning its output tensor."""

    def __init__(self, seed: int = 0) -> None:
        self.b = _Builder()
        self.s = _schema()
        self.rng = np.random.default_rng(seed)
        self.T = self.s.TensorType

    def shape(self, t: int) -> List[int]:
        return list(self.b.tensors[t].shape)

    def const(self, name: str, value: np.ndarray) -> int:
        ttype = self.T.INT32 if value.dtype == np.int32 else self.T.FLOAT32
        return self.b.tensor(name, value.shape, ttype, value)

    def act(self, name: str, shape: Sequence[int], ttype: Optional[int] = None) -> int:
        return self.b.tensor(name, list(shape), self.T.FLOAT32 if ttype is None else ttype)

    def op(self, code_name: str, inputs, name: str, shape, options_name: str = "",
           options=None, ttype=None) -> int:
        out = self.act(name, shape, ttype)
        s = self.s
        self.b.op(getattr(s.BuiltinOperator, code_name), 1, inputs, [out],
                  getattr(s.BuiltinOptions, options_name) if options_name else 0, options)
        return out

    def fc(self, x: int, n_out: int, name: str) -> int:
        k = self.shape(x)[-1]
        w = self.const(f"{name}/weights", (self.rng.standard_normal((n_out, k)) /
                                           np.sqrt(k)).astype(np.float32))
        bias = self.const(f"{name}/bias", (self.rng.standard_normal(n_out) * 0.1)
                          .astype(np.float32))
        o = self.s.FullyConnectedOptionsT()
        o.fusedActivationFunction = self.s.ActivationFunctionType.NONE
        o.keepNumDims = True
        return self.op("FULLY_CONNECTED", [x, w, bias], name, self.shape(x)[:-1] + [n_out],
                       "FullyConnectedOptions", o)

    def transpose(self, x: int, perm: Sequence[int], name: str) -> int:
        p = self.const(f"{name}/perm", np.array(perm, np.int32))
        shp = self.shape(x)
        return self.op("TRANSPOSE", [x, p], name, [shp[i] for i in perm], "TransposeOptions",
                       self.s.TransposeOptionsT())

    def reshape(self, x: int, shape: Sequence[int], name: str) -> int:
        p = self.const(f"{name}/shape", np.array(shape, np.int32))
        o = self.s.ReshapeOptionsT()
        o.newShape = list(shape)
        return self.op("RESHAPE", [x, p], name, shape, "ReshapeOptions", o)

    def mean(self, x: int, axes: Sequence[int], keep: bool, name: str) -> int:
        a = self.const(f"{name}/axes", np.array(axes, np.int32))
        shp = self.shape(x)
        rank = len(shp)
        axes = [d % rank for d in axes]
        out = [1 if i in axes else n for i, n in enumerate(shp)] if keep else [
            n for i, n in enumerate(shp) if i not in axes]
        o = self.s.ReducerOptionsT()
        o.keepDims = keep
        return self.op("MEAN", [x, a], name, out, "ReducerOptions", o)

    def binary(self, code: str, a: int, b: int, name: str) -> int:
        sa, sb = self.shape(a), self.shape(b)
        rank = max(len(sa), len(sb))
        sa, sb = [1] * (rank - len(sa)) + sa, [1] * (rank - len(sb)) + sb
        out = [max(x, y) for x, y in zip(sa, sb)]
        opts = {"ADD": ("AddOptions", self.s.AddOptionsT),
                "SUB": ("SubOptions", self.s.SubOptionsT),
                "MUL": ("MulOptions", self.s.MulOptionsT)}.get(code)
        return self.op(code, [a, b], name, out, *((opts[0], opts[1]()) if opts else ("", None)))

    def unary(self, code: str, x: int, name: str) -> int:
        return self.op(code, [x], name, self.shape(x))

    def layer_norm(self, x: int, name: str, axes: Sequence[int] = (-1,)) -> int:
        """Over `axes` (a LayerNorm: the last), as converters write it."""
        n = self.shape(x)[-1]
        m = self.mean(x, axes, True, f"{name}/mean")
        d2 = self.binary("SQUARED_DIFFERENCE", x, m, f"{name}/sqdiff")
        v = self.mean(d2, axes, True, f"{name}/var")
        eps = self.const(f"{name}/eps", np.array(1e-5, np.float32))
        r = self.unary("RSQRT", self.binary("ADD", v, eps, f"{name}/add_eps"), f"{name}/rsqrt")
        c = self.binary("SUB", x, m, f"{name}/centred")
        y = self.binary("MUL", c, r, f"{name}/scaled")
        g = self.const(f"{name}/gamma", (1 + 0.1 * self.rng.standard_normal(n)).astype(np.float32))
        bt = self.const(f"{name}/beta", (0.1 * self.rng.standard_normal(n)).astype(np.float32))
        return self.binary("ADD", self.binary("MUL", y, g, f"{name}/gamma_mul"), bt, name)

    def rms_norm(self, x: int, name: str) -> int:
        sq = self.unary("SQUARE", x, f"{name}/square")
        v = self.mean(sq, [-1], True, f"{name}/ms")
        eps = self.const(f"{name}/eps", np.array(1e-6, np.float32))
        r = self.unary("RSQRT", self.binary("ADD", v, eps, f"{name}/add_eps"), f"{name}/rsqrt")
        return self.binary("MUL", x, r, name)

    def softmax(self, x: int, name: str) -> int:
        o = self.s.SoftmaxOptionsT()
        o.beta = 1.0
        return self.op("SOFTMAX", [x], name, self.shape(x), "SoftmaxOptions", o)

    def bmm(self, a: int, b: int, name: str, adj_y: bool = False) -> int:
        sa, sb = self.shape(a), self.shape(b)
        n = sb[-2] if adj_y else sb[-1]
        o = self.s.BatchMatMulOptionsT()
        o.adjX, o.adjY = False, adj_y
        return self.op("BATCH_MATMUL", [a, b], name, sa[:-1] + [n], "BatchMatMulOptions", o)

    def finish(self, inputs, outputs, sig_inputs=None) -> bytes:
        names = [self.b.tensors[t].name for t in inputs]
        return self.b.finish(inputs, outputs, "driftscope axis-name test model",
                             signature=("serving_default", sig_inputs or names,
                                        [self.b.tensors[t].name for t in outputs]))


def transposed_norm(seq: int = 6, hidden: int = 8, fixed: bool = False) -> bytes:
    n = _Net(seed=1)
    x = n.act("x", [2, seq, hidden])
    h = n.fc(x, hidden, "fc")
    if fixed:
        out = n.layer_norm(h, "norm")
    else:
        out = n.transpose(n.layer_norm(n.transpose(h, [0, 2, 1], "fc_t"), "norm"), [0, 2, 1],
                          "out")
    return n.finish([x], [out])


def norm_over_seq(seq: int = 6, hidden: int = 8) -> bytes:
    """The same bug without transposes: MEAN and variance over axis 1 (the tokens)."""
    n = _Net(seed=1)
    x = n.act("x", [2, seq, hidden])
    return n.finish([x], [n.layer_norm(n.fc(x, hidden, "fc"), "norm", axes=[1])])


def flattening_fc(seq: int = 4, hidden: int = 6, out: int = 5) -> bytes:
    """FULLY_CONNECTED without keep_num_dims: [2,S,H] -> [2*S, out]."""
    n = _Net(seed=4)
    x = n.act("x", [2, seq, hidden])
    w = n.const("proj/weights", np.ones((out, hidden), np.float32))
    o = n.s.FullyConnectedOptionsT()
    o.keepNumDims = False
    y = n.op("FULLY_CONNECTED", [x, w, -1], "proj", [2 * seq, out], "FullyConnectedOptions", o)
    return n.finish([x], [y])


def attention(wrong_softmax: bool = False, seq: int = 5, hidden: int = 8) -> bytes:
    n = _Net(seed=2)
    x = n.act("x", [1, seq, hidden])
    q, k, v = (n.fc(x, hidden, p) for p in ("q_proj", "k_proj", "v_proj"))
    scores = n.bmm(q, k, "scores", adj_y=True)
    if wrong_softmax:  # over the query axis: TFLite's softmax takes the last axis only
        probs = n.transpose(n.softmax(n.transpose(scores, [0, 2, 1], "scores_t"), "probs_t"),
                            [0, 2, 1], "probs")
    else:
        probs = n.softmax(scores, "probs")
    return n.finish([x], [n.bmm(probs, v, "context")])


VOCAB, SEQ, HIDDEN, HEADS, FFN, CLASSES = 30, 7, 16, 2, 32, 3


def encoder(seq: int = SEQ) -> bytes:
    n = _Net(seed=3)
    T = n.T
    ids = n.act("serving_default_input_ids:0", [1, seq], T.INT32)
    mask = n.act("serving_default_attention_mask:0", [1, seq], T.INT32)
    table = n.const("embeddings/word_embeddings",
                    (0.5 * n.rng.standard_normal((VOCAB, HIDDEN))).astype(np.float32))
    g = n.s.GatherOptionsT()
    g.axis = 0
    emb = n.op("GATHER", [table, ids], "embeddings/lookup", [1, seq, HIDDEN], "GatherOptions", g)
    h = n.layer_norm(emb, "embeddings/norm")
    d = HIDDEN // HEADS

    def heads(t: int, name: str) -> int:
        return n.transpose(n.reshape(t, [1, seq, HEADS, d], f"{name}/split"), [0, 2, 1, 3],
                           f"{name}/heads")

    q = heads(n.fc(h, HIDDEN, "attention/q_proj"), "attention/q")
    k = heads(n.fc(h, HIDDEN, "attention/k_proj"), "attention/k")
    v = heads(n.fc(h, HIDDEN, "attention/v_proj"), "attention/v")
    scores = n.bmm(q, k, "attention/scores", adj_y=True)
    scaled = n.binary("MUL", scores, n.const("attention/scale", np.array(d ** -0.5, np.float32)),
                      "attention/scaled")
    c = n.s.CastOptionsT()
    c.inDataType, c.outDataType = T.INT32, T.FLOAT32
    mf = n.op("CAST", [mask], "attention/mask_float", [1, seq], "CastOptions", c)
    inv = n.binary("SUB", n.const("attention/one", np.array(1.0, np.float32)), mf,
                   "attention/mask_inv")
    bias = n.binary("MUL", inv, n.const("attention/neg", np.array(-1e4, np.float32)),
                    "attention/mask_bias")
    bias4 = n.reshape(bias, [1, 1, 1, seq], "attention/mask_4d")
    probs = n.softmax(n.binary("ADD", scaled, bias4, "attention/masked"), "attention/probs")
    ctx = n.bmm(probs, v, "attention/context")
    merged = n.reshape(n.transpose(ctx, [0, 2, 1, 3], "attention/context_t"), [1, seq, HIDDEN],
                       "attention/merge")
    h = n.layer_norm(n.binary("ADD", n.fc(merged, HIDDEN, "attention/o_proj"), h,
                              "attention/residual"), "attention/norm")
    up = n.unary("GELU", n.fc(h, FFN, "mlp/up"), "mlp/gelu")
    h = n.rms_norm(n.binary("ADD", n.fc(up, HIDDEN, "mlp/down"), h, "mlp/residual"),
                   "final_norm")
    pooled = n.mean(h, [1], False, "pooled")
    probs = n.softmax(n.fc(pooled, CLASSES, "classifier"), "probabilities")
    return n.finish([ids, mask], [probs], sig_inputs=["input_ids", "attention_mask"])


def encoder_inputs(seq: int = SEQ):
    rng = np.random.default_rng(5)
    ids = rng.integers(0, VOCAB, (1, seq)).astype(np.int32)
    mask = np.ones((1, seq), np.int32)
    mask[0, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}
