"""The axis-name propagation table (python/driftscope/recorders/axes_rules.py, docs/axes.md §1.1),
one rule at a time, with no framework: every rule's output names and events, and that a rule
never throws."""

import pytest

from driftscope.recorders import axes_rules as R
from driftscope.recorders.axes_rules import Arg, Ctx

BSH = ("batch", "seq", "hidden")


def run(op, args, outs, kwargs=None, **kw):
    ctx = Ctx(op, args, kwargs or {}, outs, **kw)
    return R.propagate(ctx), ctx


def test_elementwise_keeps():
    got, ctx = run("gelu", [Arg(BSH, (2, 5, 8))], [(2, 5, 8)])
    assert got == [BSH] and not ctx.events


def test_broadcast_aligns_right_to_left():
    got, ctx = run("add", [Arg(BSH, (2, 5, 8)), Arg(("hidden",), (8,))], [(2, 5, 8)])
    assert got == [BSH] and not ctx.events
    # an unnamed operand contributes nothing; a size-1 axis broadcasts without conflict
    got, _ = run("mul", [Arg(None, (2, 5, 8)), Arg(("batch", None, "hidden"), (2, 1, 8))],
                 [(2, 5, 8)])
    assert got == [("batch", None, "hidden")]


def test_broadcast_conflict_is_an_event_and_ends_that_axis():
    x = Arg(BSH, (2, 8, 8))
    b = Arg(("hidden", None), (8, 1))  # a per-feature vector put along the token axis
    got, ctx = run("add", [x, b], [(2, 8, 8)])
    assert got == [("batch", None, "hidden")]
    assert [e[0] for e in ctx.events] == ["broadcast"]
    assert ctx.events[0][2] == BSH and ctx.events[0][5] == ("hidden", None)


def test_broadcast_seq_meets_key_without_conflict():
    scores = Arg(("batch", "heads", "query", "key"), (2, 4, 5, 5))
    mask = Arg(("batch", None, None, "seq"), (2, 1, 1, 5))
    got, ctx = run("add", [scores, mask], [(2, 4, 5, 5)])
    assert got == [("batch", "heads", "query", "key")]


def test_transpose_and_permute():
    got, _ = run("transpose", [Arg(BSH, (2, 5, 8)), 1, 2], [(2, 8, 5)])
    assert got == [("batch", "hidden", "seq")]
    got, _ = run("transpose", [Arg(BSH, (2, 5, 8)), -1, -2], [(2, 8, 5)])
    assert got == [("batch", "hidden", "seq")]
    n4 = ("batch", "seq", "heads", "head_dim")
    got, _ = run("permute", [Arg(n4, (2, 5, 4, 2)), 0, 2, 1, 3], [(2, 4, 5, 2)])
    assert got == [("batch", "heads", "seq", "head_dim")]
    got, _ = run("permute", [Arg(n4, (2, 5, 4, 2)), (0, 2, 1, 3)], [(2, 4, 5, 2)])
    assert got == [("batch", "heads", "seq", "head_dim")]


def test_view_splits_heads_and_merges_back():
    splits = {}
    got, _ = run("view", [Arg(BSH, (2, 5, 8)), 2, 5, 4, 2], [(2, 5, 4, 2)], num_heads=4,
                 splits=splits)
    assert got == [("batch", "seq", "heads", "head_dim")]
    got, _ = run("reshape", [Arg(got[0], (2, 5, 4, 2)), 2, 5, 8], [(2, 5, 8)], splits=splits)
    assert got == [BSH]


def test_view_without_head_count_splits_by_parts_and_merges_batch_seq():
    splits = {}
    got, _ = run("view", [Arg(BSH, (2, 5, 8))], [(2, 5, 2, 4)], splits=splits)
    assert got == [("batch", "seq", "hidden#0", "hidden#1")]
    got, _ = run("flatten", [Arg(BSH, (2, 5, 8))], [(10, 8)])
    assert got == [("batch*seq", "hidden")]
    got, _ = run("unsqueeze", [Arg(("hidden",), (8,)), -1], [(8, 1)])
    assert got == [("hidden", None)]
    got, _ = run("squeeze", [Arg(("batch", None, "hidden"), (2, 1, 8))], [(2, 8)])
    assert got == [("batch", "hidden")]
    # groups whose products match only across several axes on both sides end the names
    got, _ = run("view", [Arg(("a", "b"), (6, 4))], [(4, 6)])
    assert got == [None]


def test_linear_contracts_and_names_the_output_feature():
    got, _ = run("linear", [Arg(BSH, (2, 5, 8))], [(2, 5, 8)], module="q_proj")
    assert got == [BSH]  # width unchanged: hidden
    got, _ = run("linear", [Arg(BSH, (2, 5, 8))], [(2, 5, 32)], module="fc1",
                 widths={"hidden": 8})
    assert got == [("batch", "seq", "fc1.out")]
    got, _ = run("linear", [Arg(("batch", "seq", "fc1.out"), (2, 5, 32))], [(2, 5, 8)],
                 module="fc2", widths={"hidden": 8})
    assert got == [BSH]  # back to the model's hidden width


def test_matmul_qk_gives_query_key_and_pv_gives_seq_back():
    q = Arg(("batch", "heads", "seq", "head_dim"), (2, 4, 5, 2))
    kt = Arg(("batch", "heads", "head_dim", "seq"), (2, 4, 2, 5))
    got, _ = run("matmul", [q, kt], [(2, 4, 5, 5)])
    assert got == [("batch", "heads", "query", "key")]
    p = Arg(got[0], (2, 4, 5, 5))
    v = Arg(("batch", "heads", "seq", "head_dim"), (2, 4, 5, 2))
    got, _ = run("matmul", [p, v], [(2, 4, 5, 2)])
    assert got == [("batch", "heads", "seq", "head_dim")]


def test_sdpa_and_embedding():
    q = Arg(("batch", "heads", "seq", "head_dim"), (2, 4, 5, 2))
    got, _ = run("scaled_dot_product_attention", [q, q, q], [(2, 4, 5, 2)])
    assert got == [q.names]
    widths = {}
    got, _ = run("embedding", [Arg(("batch", "seq"), (2, 5)), Arg(None, (100, 8))], [(2, 5, 8)],
                 widths=widths)
    assert got == [BSH] and widths == {"hidden": 8}


def test_reductions_keepdim_and_event():
    got, ctx = run("mean", [Arg(BSH, (2, 5, 8)), -1], [(2, 5)])
    assert got == [("batch", "seq")]
    assert ctx.events[0][0] == "reduce" and ctx.events[0][4] == (2,)
    got, ctx = run("sum", [Arg(BSH, (2, 5, 8))], [(1, 5, 8)], {"dim": 0, "keepdim": True})
    assert got == [BSH] and ctx.events[0][4] == (0,)
    got, ctx = run("sum", [Arg(BSH, (2, 5, 8))], [()])
    assert got == [()] and not ctx.events


def test_softmax_and_layer_norm_events():
    s = ("batch", "heads", "query", "key")
    got, ctx = run("softmax", [Arg(s, (2, 4, 5, 5))], [(2, 4, 5, 5)], {"dim": -2})
    assert got == [s] and ctx.events[0][0] == "softmax" and ctx.events[0][4] == (2,)
    got, ctx = run("layer_norm", [Arg(("batch", "hidden", "seq"), (2, 8, 5)), (5,)], [(2, 8, 5)])
    assert ctx.events[0][0] == "norm" and ctx.events[0][4] == (2,)


def test_getitem_cat_stack_split():
    got, _ = run("getitem", [Arg(BSH, (2, 5, 8)), (slice(None), 0)], [(2, 8)])
    assert got == [("batch", "hidden")]
    got, _ = run("getitem", [Arg(("batch", "seq"), (2, 5)), (slice(None), None, None, slice(None))],
                 [(2, 1, 1, 5)])
    assert got == [("batch", None, None, "seq")]
    got, _ = run("getitem", [Arg(BSH, (2, 5, 8)), (Ellipsis, 0)], [(2, 5)])
    assert got == [("batch", "seq")]
    a, b = Arg(BSH, (2, 5, 8)), Arg(BSH, (2, 3, 8))
    got, ctx = run("cat", [[a, b], 1], [(2, 8, 8)])
    assert got == [("batch", None, "hidden")] and not ctx.events  # seq: a new size, no name
    c = Arg(("batch", "hidden", "seq"), (2, 8, 8))  # a transposed part joined along seq
    got, ctx = run("cat", [[a, c]], [(2, 13, 8)], {"dim": 1})
    assert got == [("batch", None, None)]
    assert ctx.events[0][0] == "concat" and ctx.events[0][4] == (1,)
    assert ctx.events[0][5] == ("batch", "hidden", "seq")
    got, _ = run("stack", [[a, a]], [(2, 2, 5, 8)], {"dim": 0})
    assert got == [(None,) + BSH]
    got, _ = run("split", [a, 4, -1], [(2, 5, 4), (2, 5, 4)])
    assert got == [("batch", "seq", None)] * 2
    # a fused q,k,v projection split into three parts of the hidden width: hidden
    qkv = Arg(("batch", "seq", "attn.c_attn.out"), (2, 5, 24))
    got, _ = run("split", [qkv, 8], [(2, 5, 8)] * 3, {"dim": 2}, widths={"hidden": 8})
    assert got == [BSH] * 3
    got, _ = run("getitem", [Arg(BSH, (2, 5, 8)), (slice(None), slice(0, 3))], [(2, 3, 8)])
    assert got == [("batch", None, "hidden")]  # a slice that changes the size: no name


def test_no_rule_ends_names_and_rules_never_throw():
    assert R.propagate(Ctx("fft_fft", [Arg(BSH, (2, 5, 8))], {}, [(2, 5, 8)])) is None
    # bad arguments: the rule fails, propagate says "no names" instead of raising
    ctx = Ctx("transpose", [Arg(BSH, (2, 5, 8)), 7, 9], {}, [(2, 5, 8)])
    assert R.propagate(ctx) is None and not ctx.events
    ctx = Ctx("permute", [Arg(BSH, (2, 5, 8)), "x"], {}, [(2, 5, 8)])
    assert R.propagate(ctx) is None


def test_op_names():
    assert R.op_name("__radd__") == ("add", True)
    assert R.op_name("__iadd__") == ("add", False)
    assert R.op_name("add_") == ("add", False)
    assert R.op_name("__getitem__") == ("getitem", False)
    assert R.op_name("__matmul__") == ("matmul", False)


@pytest.mark.parametrize("spec,msg", [
    ("batch,,hidden", "empty axis name"),
    ("batch,seq,batch", "declared twice"),
    ("batch,se\tq", "control character"),
    (["batch", "a,b"], "contains a comma"),
    (3, "expected"),
])
def test_parse_axes_rejects(spec, msg):
    with pytest.raises(R.AxesError, match=msg):
        R.parse_axes(spec, "x")


def test_parse_axes_accepts():
    assert R.parse_axes("batch, seq,hidden", "x") == BSH
    assert R.parse_axes(["batch", "seq"], "x") == ("batch", "seq")
