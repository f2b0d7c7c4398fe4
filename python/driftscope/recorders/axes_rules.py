"""Axis-name propagation: the one table of rules (docs/axes.md §1.1).

A recorder declares names on a model's inputs (``input_axes=``, or the conventions below) and
carries them through every op it sees. This module is the table of rules, pure Python with no
framework import, so every rule is testable on its own (tests/python/test_axes_rules.py). The
PyTorch recorder calls :func:`propagate` from its TorchFunctionMode.

A tensor's names are a tuple with one entry per axis, ``None`` for an axis without a name; a
tensor with no names at all is ``None``. An op with no rule ends the names on its outputs (the
recorder notes where: ``axes_stop``); a rule never guesses a name and never throws (a failing rule
is the same as no rule).

Rules do not judge. What a rule sees that ``driftscope check`` may judge (a normalisation, a
softmax, a reduction, two differently named axes meeting in a broadcast or a concatenation) is
returned as an *event*, written by the recorder into the ``axes_ops`` attribute; the C++ check
decides which events are findings (norm_over, softmax_over, reduce_over_batch,
broadcast_conflict, concat_mismatch).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["Arg", "Ctx", "Event", "propagate", "parse_axes", "CONVENTIONS", "RULES",
           "AxesError", "MAX_EVENTS"]

Names = Optional[Tuple[Optional[str], ...]]

# Names a model's inputs get without a declaration, keyed by the forward's parameter name; used
# only when the rank matches (a declaration always wins).
CONVENTIONS: Mapping[str, Tuple[str, ...]] = {
    "input_ids": ("batch", "seq"),
    "attention_mask": ("batch", "seq"),
    "token_type_ids": ("batch", "seq"),
    "position_ids": ("batch", "seq"),
    "inputs_embeds": ("batch", "seq", "hidden"),
    "pixel_values": ("batch", "channels", "height", "width"),
}

# Pairs of names that meet in a broadcast without conflict: `query`/`key` are the two roles of
# `seq` in attention (an attention mask over `seq` is added to scores over `key`). The C++ check
# holds the same list (src/check/run_check.cpp, kCompatible).
COMPATIBLE = frozenset({frozenset({"seq", "key"}), frozenset({"seq", "query"})})

MAX_EVENTS = 32  # per record: the recorder keeps at most this many


class AxesError(ValueError):
    """A user's axis declaration is malformed (the recorders turn it into exit 2)."""


def parse_axes(spec: Any, what: str) -> Tuple[str, ...]:
    """A declaration ``"batch,seq,hidden"`` or a sequence of names, checked: non-empty names, no
    comma or control character, no name twice."""
    if isinstance(spec, str):
        names = [n.strip() for n in spec.split(",")]
    elif isinstance(spec, (list, tuple)):
        names = list(spec)
        for n in names:
            if not isinstance(n, str):
                raise AxesError(f"{what}: axis names must be strings, got {type(n).__name__}")
            if "," in n:
                raise AxesError(f"{what}: axis name {n!r} contains a comma")
        names = [n.strip() for n in names]
    else:
        raise AxesError(f"{what}: expected 'name,name,...' or a list of names, "
                        f"got {type(spec).__name__}")
    for n in names:
        if not n:
            raise AxesError(f"{what}: empty axis name in {spec!r}")
        if any(ord(c) < 32 or ord(c) == 127 for c in n):
            raise AxesError(f"{what}: axis name {n!r} contains a control character")
    seen = set()
    for n in names:
        if n in seen:
            raise AxesError(f"{what}: axis name {n!r} is declared twice in {spec!r}")
        seen.add(n)
    return tuple(names)


class Arg:
    """A tensor argument as the rules see it: its names and shape."""

    __slots__ = ("names", "shape")

    def __init__(self, names: Names, shape: Sequence[int]) -> None:
        self.names = names
        self.shape = tuple(int(s) for s in shape)

    def __repr__(self) -> str:
        return f"Arg({self.names}, {self.shape})"


class Event(tuple):
    """(kind, op, names, sizes, axes, names2, sizes2): what check may judge."""


class Ctx:
    """One op call: `args`/`kwargs` with tensors replaced by :class:`Arg`, the output shapes,
    the innermost module's name and declared head count, the widths of known feature names, and
    the splits seen so far (``("heads", "head_dim") -> "hidden"``, so a merge restores the name)."""

    def __init__(self, op: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                 outs: Sequence[Sequence[int]], module: str = "", num_heads: Optional[int] = None,
                 widths: Optional[Dict[str, int]] = None,
                 splits: Optional[Dict[Tuple[str, ...], str]] = None) -> None:
        self.op = op
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.outs = [tuple(int(s) for s in o) for o in outs]
        self.module = module
        self.num_heads = num_heads
        self.widths = widths if widths is not None else {}
        self.splits = splits if splits is not None else {}
        self.events: List[Event] = []

    def tensors(self) -> List[Arg]:
        out = [a for a in self.args if isinstance(a, Arg)]
        for a in self.args:
            if isinstance(a, (list, tuple)):
                out += [x for x in a if isinstance(x, Arg)]
        out += [a for a in self.kwargs.values() if isinstance(a, Arg)]
        return out

    def first(self) -> Optional[Arg]:
        t = self.tensors()
        return t[0] if t else None

    def param(self, i: int, key: str, default: Any = None) -> Any:
        if key in self.kwargs:
            return self.kwargs[key]
        return self.args[i] if len(self.args) > i else default

    def event(self, kind: str, a: Arg, axes: Sequence[int] = (), b: Optional[Arg] = None) -> None:
        self.events.append(Event((kind, self.op, a.names, a.shape, tuple(axes),
                                  b.names if b else None, b.shape if b else None)))


Rule = Callable[[Ctx], List[Names]]


def _norm_dim(d: Any, rank: int) -> int:
    d = int(d)
    if d < 0:
        d += rank
    if not 0 <= d < rank:
        raise IndexError(d)
    return d


def _dims(d: Any, rank: int) -> Optional[List[int]]:
    if d is None:
        return None
    if isinstance(d, (list, tuple)):
        return sorted({_norm_dim(x, rank) for x in d})
    return [_norm_dim(d, rank)]


def _resized(ctx: Ctx, name: Optional[str], old: int, new: int) -> Optional[str]:
    """The name of an axis a slice, split or concatenation gave a new size: one name means one
    size in a run (check's axis_size), so it keeps its name only at its old size, becomes a known
    feature name of the new width (``hidden`` for a q,k,v split), or loses its name."""
    if old == new:
        return name
    return next((n for n, w in ctx.widths.items() if w == new), None) if name else None


def _all_outs(ctx: Ctx, names: Names) -> List[Names]:
    if names and all(n is None for n in names):
        names = None  # not one name left: the names end here
    return [names if names is not None and len(names) == len(o) else None for o in ctx.outs]


# -- the rules ------------------------------------------------------------------------------------

def keep(ctx: Ctx) -> List[Names]:
    """Elementwise, activations, casts, dropout: the first tensor's names."""
    a = ctx.first()
    return _all_outs(ctx, a.names if a else None)


def broadcast(ctx: Ctx) -> List[Names]:
    """Aligns names right to left; two different names of one axis are an event (and the axis
    loses its name unless they are a compatible pair, seq/key or seq/query)."""
    ts = [t for t in ctx.tensors()]
    if not ts or not ctx.outs:
        return [None] * len(ctx.outs)
    rank = len(ctx.outs[0])
    named = [t for t in ts if t.names is not None]
    if not named:
        return [None] * len(ctx.outs)
    for i, a in enumerate(named):  # one event per pair of operands whose names differ
        for b in named[i + 1:]:
            for k in range(1, min(len(a.shape), len(b.shape)) + 1):
                na, nb = a.names[-k], b.names[-k]
                if na and nb and na != nb and a.shape[-k] > 1 and b.shape[-k] > 1:
                    ctx.event("broadcast", a, (), b)
                    break
    out: List[Optional[str]] = []
    for k in range(rank, 0, -1):
        size = ctx.outs[0][-k]
        cands = [t.names[-k] for t in named if len(t.shape) >= k and t.shape[-k] == size
                 and t.names[-k]]
        if not cands and size == 1:
            cands = [t.names[-k] for t in named if len(t.shape) >= k and t.names[-k]]
        distinct = list(dict.fromkeys(cands))
        if len(distinct) == 1:
            out.append(distinct[0])
        elif len(distinct) == 2 and frozenset(distinct) in COMPATIBLE:
            out.append(next(n for n in distinct if n != "seq"))
        else:
            out.append(None)
    return _all_outs(ctx, tuple(out))


def transpose(ctx: Ctx) -> List[Names]:
    a = ctx.first()
    if a is None or a.names is None:
        return [None]
    rank = len(a.shape)
    if ctx.op in ("t",) or (ctx.op == "mT"):
        d0, d1 = rank - 2, rank - 1
    else:
        d0, d1 = _norm_dim(ctx.param(1, "dim0"), rank), _norm_dim(ctx.param(2, "dim1"), rank)
    n = list(a.names)
    n[d0], n[d1] = n[d1], n[d0]
    return [tuple(n)]


def permute(ctx: Ctx) -> List[Names]:
    a = ctx.first()
    if a is None or a.names is None:
        return [None]
    dims = ctx.kwargs.get("dims")
    if dims is None:
        rest = ctx.args[1:]
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest
    rank = len(a.shape)
    order = [_norm_dim(d, rank) for d in dims]
    if sorted(order) != list(range(rank)):
        return [None]
    return [tuple(a.names[d] for d in order)]


def regroup(ctx: Ctx) -> List[Names]:
    """view/reshape/flatten/unflatten/squeeze/unsqueeze and friends, by sizes: consecutive input
    and output axes are grouped where their products match. One axis to one keeps its name; one
    to several is a split (``hidden`` -> ``heads,head_dim`` when the first part is the declared
    head count, else ``hidden#0,hidden#1``); several to one is a merge (a split's parts give back
    its source; other names join with ``*``: ``batch*seq``); size-1 axes that appear are
    unnamed; anything else ends the names of that group."""
    a = ctx.first()
    if a is None or a.names is None or not ctx.outs:
        return [None] * len(ctx.outs)
    return _all_outs(ctx, _regroup(a.names, a.shape, ctx.outs[0], ctx))


def _regroup(names: Tuple[Optional[str], ...], ishape: Tuple[int, ...], oshape: Tuple[int, ...],
             ctx: Ctx) -> Names:
    if 0 in ishape or 0 in oshape:
        return None
    out: List[Optional[str]] = [None] * len(oshape)
    i = j = 0
    ni, no = len(ishape), len(oshape)
    while i < ni or j < no:
        if j < no and oshape[j] == 1 and (i >= ni or ishape[i] != 1):
            j += 1
            continue
        if i < ni and ishape[i] == 1 and (j >= no or oshape[j] != 1):
            i += 1
            continue
        if i >= ni or j >= no:
            return None
        gi, gj = [i], [j]
        pi, pj = ishape[i], oshape[j]
        i += 1
        j += 1
        while pi != pj:
            if pi < pj:
                if i >= ni:
                    return None
                pi *= ishape[i]
                gi.append(i)
                i += 1
            else:
                if j >= no:
                    return None
                pj *= oshape[j]
                gj.append(j)
                j += 1
        src = [names[k] for k in gi]
        if len(gi) == 1 and len(gj) == 1:
            out[gj[0]] = src[0]
        elif len(gi) == 1:
            parts = [oshape[k] for k in gj]
            if src[0] is None:
                continue
            if len(gj) == 2 and ctx.num_heads and parts[0] == ctx.num_heads:
                split: Tuple[str, ...] = ("heads", "head_dim")
            else:
                split = tuple(f"{src[0]}#{k}" for k in range(len(gj)))
            ctx.splits[split] = src[0]
            for k, n in zip(gj, split):
                out[k] = n
        elif len(gj) == 1:
            if any(n is None for n in src):
                continue
            key = tuple(n for n in src if n is not None)
            out[gj[0]] = ctx.splits.get(key) or "*".join(key)
    return tuple(out)


def linear(ctx: Ctx) -> List[Names]:
    """Contracts the input's feature (last) axis; the output feature keeps the input's name when
    the width is unchanged, takes a known feature name of that width (``hidden``), else is named
    after the module (``q_proj.out``)."""
    a = ctx.first()
    if a is None or a.names is None or not ctx.outs or not a.shape:
        return [None] * len(ctx.outs)
    width = ctx.outs[0][-1]
    if width == a.shape[-1] and a.names[-1]:
        feat: Optional[str] = a.names[-1]
    else:
        feat = next((n for n, w in ctx.widths.items() if w == width), None)
        if feat is None and ctx.module:
            feat = f"{ctx.module}.out"
    return _all_outs(ctx, a.names[:-1] + (feat,))


def matmul(ctx: Ctx) -> List[Names]:
    """[..., m, k] @ [..., k, n] -> [..., m, n], leading axes broadcast. QK^T (both sides name
    the same axis, ``seq``) gives ``query,key``; contracting ``key`` gives the query axis its
    ``seq`` back (probabilities @ V)."""
    ts = ctx.tensors()
    if len(ts) < 2 or not ctx.outs:
        return [None] * len(ctx.outs)
    a, b = ts[0], ts[1]
    if a.names is None or b.names is None or len(a.shape) < 2 or len(b.shape) < 2:
        return [None] * len(ctx.outs)
    m, n = a.names[-2], b.names[-1]
    if m is not None and m == n:
        m, n = "query", "key"
    elif m == "query" and a.names[-1] == "key":
        m = "seq"
    rank = len(ctx.outs[0])
    lead: List[Optional[str]] = []
    for k in range(rank, 2, -1):
        cands = [t.names[-k] for t in (a, b) if len(t.shape) >= k and t.names[-k]]
        lead.append(cands[0] if len(set(cands)) == 1 else None)
    return _all_outs(ctx, tuple(lead) + (m, n))


def sdpa(ctx: Ctx) -> List[Names]:
    """scaled_dot_product_attention(q, k, v): q's axes with v's feature axis."""
    ts = ctx.tensors()
    if len(ts) < 3 or ts[0].names is None or ts[2].names is None:
        return [None] * len(ctx.outs)
    return _all_outs(ctx, ts[0].names[:-1] + ts[2].names[-1:])


def embedding(ctx: Ctx) -> List[Names]:
    """A lookup adds the embedding axis: ``hidden`` (``embed`` when ``hidden`` has another
    width)."""
    a = ctx.first()
    if a is None or a.names is None or not ctx.outs:
        return [None] * len(ctx.outs)
    width = ctx.outs[0][-1]
    name = "hidden" if ctx.widths.setdefault("hidden", width) == width else "embed"
    return _all_outs(ctx, a.names + (name,))


def reduction(ctx: Ctx) -> List[Names]:
    """Removes the reduced axes (keeps them, size 1, with keepdim); an event when dims are given."""
    a = ctx.first()
    if a is None or a.names is None:
        return [None] * len(ctx.outs)
    rank = len(a.shape)
    dims = _dims(ctx.param(1, "dim"), rank)
    if dims is None:
        dims = _dims(ctx.param(1, "axis"), rank)
    if dims is None:
        return [() if len(o) == 0 else None for o in ctx.outs]
    ctx.event("reduce", a, dims)
    keepdim = bool(ctx.param(2, "keepdim", False))
    names = a.names if keepdim else tuple(n for i, n in enumerate(a.names) if i not in dims)
    return _all_outs(ctx, names)


def softmax(ctx: Ctx) -> List[Names]:
    a = ctx.first()
    if a is None or a.names is None:
        return [None] * len(ctx.outs)
    d = ctx.param(1, "dim")
    if d is not None:
        ctx.event("softmax", a, [_norm_dim(d, len(a.shape))])
    return _all_outs(ctx, a.names)


def layer_norm(ctx: Ctx) -> List[Names]:
    """Normalises the last ``len(normalized_shape)`` axes; a graph's decomposed normalisation
    (a MEAN over any axes, subtracted) gives those axes as ``dims``."""
    a = ctx.first()
    if a is None or a.names is None:
        return [None] * len(ctx.outs)
    rank = len(a.shape)
    dims = _dims(ctx.kwargs.get("dims"), rank)
    if dims is None:
        shape = ctx.param(1, "normalized_shape")
        n = len(shape) if isinstance(shape, (list, tuple)) else 1
        dims = list(range(rank - n, rank))
    ctx.event("norm", a, dims)
    return _all_outs(ctx, a.names)


def getitem(ctx: Ctx) -> List[Names]:
    """Basic indexing: an int removes an axis, a slice keeps it, None inserts an unnamed one;
    tensor indices end the names."""
    a = ctx.first()
    if a is None or a.names is None:
        return [None]
    idx = ctx.args[1] if len(ctx.args) > 1 else None
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(x, Arg) or isinstance(x, (list, bool)) for x in idx):
        return [None]
    consumed = sum(1 for x in idx if x is not None and x is not Ellipsis)
    out: List[Optional[str]] = []
    sizes: List[int] = []  # each output axis's size before indexing (1: a new axis)
    src = 0
    for x in idx:
        if x is Ellipsis:
            fill = len(a.names) - consumed
            out += a.names[src:src + fill]
            sizes += a.shape[src:src + fill]
            src += fill
        elif x is None:
            out.append(None)
            sizes.append(1)
        elif isinstance(x, slice):
            out.append(a.names[src])
            sizes.append(a.shape[src])
            src += 1
        elif isinstance(x, int):
            src += 1
        else:
            return [None]
    out += a.names[src:]
    sizes += a.shape[src:]
    if not ctx.outs or len(ctx.outs[0]) != len(out):
        return [None] * len(ctx.outs)
    return _all_outs(ctx, tuple(_resized(ctx, n, s, t)
                                for n, s, t in zip(out, sizes, ctx.outs[0])))


def expand(ctx: Ctx) -> List[Names]:
    """expand/broadcast_to: right-aligned names kept, new leading axes unnamed."""
    a = ctx.first()
    if a is None or a.names is None or not ctx.outs:
        return [None] * len(ctx.outs)
    extra = len(ctx.outs[0]) - len(a.names)
    return _all_outs(ctx, (None,) * extra + a.names)


def cat(ctx: Ctx) -> List[Names]:
    """cat keeps the names every part shares (an axis the parts name differently loses its name,
    and that is an event), except on the joined axis, which has a new size (:func:`_resized`);
    stack inserts an unnamed axis."""
    seq = ctx.param(0, "tensors")
    ts = [t for t in (seq or ()) if isinstance(t, Arg)]
    if not ts or any(t.names is None for t in ts) or not ctx.outs:
        return [None] * len(ctx.outs)
    rank = len(ts[0].names)
    d = _norm_dim(ctx.param(1, "dim", 0), rank + (1 if ctx.op == "stack" else 0))
    for t in ts[1:]:  # parts whose names differ: an event (check: concat_mismatch)
        if len(t.names) == rank and any(
                a and b and a != b for a, b in zip(ts[0].names, t.names)):
            ctx.event("concat", ts[0], [min(d, rank - 1)], t)
            break
    names = tuple(ts[0].names[k] if all(t.names[k] == ts[0].names[k] for t in ts) else None
                  for k in range(rank))
    if ctx.op == "stack":
        names = names[:d] + (None,) + names[d:]
    else:  # the joined axis has a new size
        names = tuple(_resized(ctx, n, ts[0].shape[k], ctx.outs[0][k]) if k < len(ctx.outs[0])
                      else n for k, n in enumerate(names))
    return _all_outs(ctx, names)


def split(ctx: Ctx) -> List[Names]:
    """split/chunk keep every name but the split axis's (:func:`_resized`); unbind removes it."""
    a = ctx.first()
    if a is None or a.names is None:
        return [None] * len(ctx.outs)
    if ctx.op == "unbind":
        d = _norm_dim(ctx.param(1, "dim", 0), len(a.names))
        return _all_outs(ctx, a.names[:d] + a.names[d + 1:])
    out: List[Names] = []
    for o in ctx.outs:  # the split axis has a new size in each part
        if len(o) != len(a.names):
            out.append(None)
            continue
        n = tuple(_resized(ctx, x, s, t) for x, s, t in zip(a.names, a.shape, o))
        out.append(n if any(x is not None for x in n) else None)
    return out


_KEEP = ("relu gelu silu tanh sigmoid dropout exp log sqrt rsqrt neg abs erf clamp clip "
         "contiguous clone to float half bfloat16 double type detach type_as masked_fill "
         "hardtanh relu6 leaky_relu elu mish softplus hardswish hardsigmoid gelu_ float_power "
         "pow square reciprocal sign sin cos log1p expm1 round floor ceil trunc nan_to_num "
         "requires_grad_ cpu cuda batch_norm group_norm instance_norm dropout1d dropout2d "
         "alpha_dropout feature_alpha_dropout celu selu prelu glu_ logical_not bool long int "
         "fill_ zero_ copy_ new_ones new_zeros")
RULES: Dict[str, Rule] = {op: keep for op in _KEEP.split()}
RULES.update({op: broadcast for op in (
    "add sub mul div truediv floordiv rsub remainder fmod maximum minimum where eq ne lt le gt ge "
    "logical_and logical_or bitwise_and bitwise_or").split()})
RULES.update({
    "transpose": transpose, "swapaxes": transpose, "swapdims": transpose, "t": transpose,
    "mT": transpose, "permute": permute,
    "view": regroup, "reshape": regroup, "flatten": regroup, "unflatten": regroup,
    "squeeze": regroup, "unsqueeze": regroup, "view_as": regroup, "reshape_as": regroup,
    "linear": linear, "matmul": matmul, "bmm": matmul, "mm": matmul,
    "scaled_dot_product_attention": sdpa, "embedding": embedding,
    "mean": reduction, "sum": reduction, "amax": reduction, "amin": reduction,
    "var": reduction, "std": reduction, "prod": reduction, "logsumexp": reduction,
    "max": reduction, "min": reduction, "norm": reduction, "argmax": reduction,
    "argmin": reduction, "all": reduction, "any": reduction, "nansum": reduction,
    "nanmean": reduction,
    "softmax": softmax, "log_softmax": softmax, "layer_norm": layer_norm, "rms_norm": layer_norm,
    "getitem": getitem, "expand": expand, "expand_as": expand, "broadcast_to": expand,
    "cat": cat, "concat": cat, "concatenate": cat, "stack": cat,
    "split": split, "chunk": split, "unbind": split, "tensor_split": split,
})


def op_name(func_name: str) -> Tuple[str, bool]:
    """``__radd__`` -> ("add", True: operands swapped); ``add_`` -> ("add", False)."""
    n = func_name
    swapped = False
    if n.startswith("__") and n.endswith("__"):
        n = n[2:-2]
        if n.startswith("r") and n[1:] in RULES:
            n, swapped = n[1:], True
        elif n.startswith("i") and n[1:] in RULES:
            n = n[1:]
    elif n.endswith("_") and n[:-1] in RULES and n not in RULES:
        n = n[:-1]
    return n, swapped


def propagate(ctx: Ctx) -> Optional[List[Names]]:
    """Names of each output, or None when the op has no rule (names stop). Never raises."""
    rule = RULES.get(ctx.op)
    if rule is None:
        return None
    try:
        got = rule(ctx)
    except Exception:  # noqa: BLE001 - a rule never throws: unusual arguments end the names
        ctx.events.clear()
        return None
    return got
