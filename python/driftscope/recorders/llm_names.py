"""Decoder tensor names across runtimes without a map (issue 31 item 2; docs/howto/llm.md).

The same layer is ``model.layers.3.self_attn.q_proj`` in transformers (Llama, Qwen2, Gemma,
Mistral, Phi-3), ``transformer.h.3.attn.c_attn`` in GPT-2, ``model.layers.3.self_attn.dense``
in Phi(-2), ``blk.3.attn_q`` in a GGUF file (llama.cpp) and ``/model/layers.3/self_attn/
q_proj/MatMul`` as an ONNX graph node. This module recognises the naming convention of each
side of a comparison, and the layer and role of every name (q/k/v/o or fused qkv projections,
MLP gate/up/down, norms, embeddings, logits, cache k/v), and writes rename rules that bring
both sides to one canonical form, the transformers Llama module paths. The rules are the
existing cross-framework alignment's ``map_a`` / ``map_b`` ("REGEX=>REPLACEMENT",
docs/compare.md §3), not a second pairing mechanism: whoever passes their own rules overrides
these. Sides in the same convention get no rules (their names already pair).

Pure Python, no framework import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["Convention", "RenamePlan", "detect", "rename_rules", "role_of", "rename_plan",
           "CANONICAL_ROLES"]

# role -> the canonical (transformers Llama) path of that role inside layer N, or at the top
CANONICAL_ROLES: Dict[str, str] = {
    "q": "model.layers.N.self_attn.q_proj", "k": "model.layers.N.self_attn.k_proj",
    "v": "model.layers.N.self_attn.v_proj", "qkv": "model.layers.N.self_attn.qkv_proj",
    "o": "model.layers.N.self_attn.o_proj", "attn": "model.layers.N.self_attn",
    "gate": "model.layers.N.mlp.gate_proj", "up": "model.layers.N.mlp.up_proj",
    "gate_up": "model.layers.N.mlp.gate_up_proj", "down": "model.layers.N.mlp.down_proj",
    "mlp": "model.layers.N.mlp", "attn_norm": "model.layers.N.input_layernorm",
    "ffn_norm": "model.layers.N.post_attention_layernorm",
    "pre_ffn_norm": "model.layers.N.pre_feedforward_layernorm",
    "post_ffn_norm": "model.layers.N.post_feedforward_layernorm",
    "layer": "model.layers.N", "embed": "model.embed_tokens",
    "pos_embed": "model.embed_positions", "final_norm": "model.norm", "lm_head": "lm_head",
    "logits": "logits", "cache_k": "cache.layers.N.key", "cache_v": "cache.layers.N.value",
}

# A name may carry a "step.K/" prefix (a generation dump) or none; rules keep it. ECMAScript
# regexes (the compare engine's std::regex): no lookbehind, so the boundary before a name is
# captured as $1 and put back.
_B = r"(^|/)"       # the start of a name, after an optional step prefix
_E = r"(?=$|[.#])"  # the end of a path component (a name, a tuple index, an op suffix)


@dataclass
class Convention:
    """One naming convention: how to recognise it from the names of a dump, and its rules to
    the canonical form as (regex, replacement, role)."""

    name: str
    families: str
    signature: str                      # a regex that a name of this convention matches
    rules: List[Tuple[str, str, str]] = field(default_factory=list)
    excludes: Tuple[str, ...] = ()      # conventions this one refines (checked first)


def _layer_rules(prefix: str, pairs: Sequence[Tuple[str, str]]) -> List[Tuple[str, str, str]]:
    """Rules for `prefix`<N>.<local> -> model.layers.<N>.<canonical local>, one per role."""
    out = []
    for local, role in pairs:
        canon = CANONICAL_ROLES[role].replace("model.layers.N", "")
        out.append((_B + prefix + r"(\d+)\." + re.escape(local).replace(r"\.", r"\.") + _E,
                    "$1model.layers.$2" + canon, role))
    return out


_CONVENTIONS: List[Convention] = [
    # ONNX graph-node paths (an exporter's node names kept as tensor names): /a/b.3/c/Op ->
    # a.b.3.c.Op, the names driftscope.recorders.naming gives nodes that are not a module's
    # last; the family rules below then apply to the dotted path.
    Convention("onnx-node-paths", "any exported graph", r"^(step\.\d+/)?/[^/]+/",
               # the step's own "/" is kept: the path's start is marked, every "/" after the
               # mark becomes ".", then the mark goes
               [(r"^(step\.\d+/)?/", "$1@", "path"), (r"/(?=[^@]*$)", ".", "path"),
                (r"@", "", "path")]),
    Convention("gpt2", "GPT-2 (transformers)", r"(^|/)transformer\.h\.\d+\.",
               [(_B + r"transformer\.wte" + _E, "$1model.embed_tokens", "embed"),
                (_B + r"transformer\.wpe" + _E, "$1model.embed_positions", "pos_embed"),
                (_B + r"transformer\.ln_f" + _E, "$1model.norm", "final_norm")]
               + _layer_rules(r"transformer\.h\.", [
                   ("attn.c_attn", "qkv"), ("attn.c_proj", "o"), ("attn", "attn"),
                   ("mlp.c_fc", "up"), ("mlp.c_proj", "down"), ("mlp", "mlp"),
                   ("ln_1", "attn_norm"), ("ln_2", "ffn_norm")])
               + [(_B + r"transformer\.h\.(\d+)" + _E, "$1model.layers.$2", "layer")]),
    Convention("phi", "Phi-1/2 (transformers)", r"(^|/)model\.(layers\.\d+\.self_attn\.dense|"
               r"final_layernorm)" + _E,
               _layer_rules(r"model\.layers\.", [("self_attn.dense", "o"), ("mlp.fc1", "up"),
                                                 ("mlp.fc2", "down")])
               + [(_B + r"model\.final_layernorm" + _E, "$1model.norm", "final_norm")]),
    # GGUF tensor names (llama.cpp, gguf-py's tensor map). Gemma 2/3 have norms after attention
    # and after the MLP, so there ffn_norm is the MLP's pre-norm.
    Convention("gguf-gemma2", "Gemma 2/3 (GGUF, llama.cpp)", r"(^|/)blk\.\d+\.post_ffw_norm" + _E,
               _layer_rules(r"blk\.", [("ffn_norm", "pre_ffn_norm"),
                                       ("post_attention_norm", "ffn_norm"),
                                       ("post_ffw_norm", "post_ffn_norm")])),
    Convention("gguf-gpt2", "GPT-2 (GGUF, llama.cpp)", r"(^|/)position_embd" + _E,
               _layer_rules(r"blk\.", [("ffn_up", "up")])
               + [(_B + r"position_embd" + _E, "$1model.embed_positions", "pos_embed")]),
    Convention("gguf-phi3", "Phi-3 (GGUF, llama.cpp: gate and up fused in ffn_up)",
               r"(^|/)blk\.\d+\.attn_qkv" + _E, []),  # refined below: ffn_up without ffn_gate
    Convention("gguf", "Llama, Qwen2, Gemma, Mistral, Phi (GGUF, llama.cpp)",
               r"(^|/)(blk\.\d+\.|token_embd|output_norm)",
               [(_B + r"token_embd" + _E, "$1model.embed_tokens", "embed"),
                (_B + r"output_norm" + _E, "$1model.norm", "final_norm"),
                (_B + r"output" + _E, "$1lm_head", "lm_head"),
                (_B + r"cache_k_l(\d+)" + _E, "$1cache.layers.$2.key", "cache_k"),
                (_B + r"cache_v_l(\d+)" + _E, "$1cache.layers.$2.value", "cache_v")]
               + _layer_rules(r"blk\.", [
                   ("attn_qkv", "qkv"), ("attn_q", "q"), ("attn_k", "k"), ("attn_v", "v"),
                   ("attn_output", "o"), ("ffn_gate", "gate"), ("ffn_up", "up"),
                   ("ffn_down", "down"), ("attn_norm", "attn_norm"), ("ffn_norm", "ffn_norm")])
               + [(_B + r"blk\.(\d+)" + _E, "$1model.layers.$2", "layer")]),
    # transformers Llama-shaped paths (Llama, Qwen2, Gemma, Mistral, Phi-3): the canonical form
    Convention("hf", "Llama, Qwen2, Gemma, Mistral, Phi-3 (transformers)",
               r"(^|/)model\.(layers\.\d+|embed_tokens|norm)" + _E, []),
]
_BY_NAME = {c.name: c for c in _CONVENTIONS}


def _strip_step(name: str) -> str:
    head, sep, rest = name.partition("/")
    return rest if sep and head.startswith("step.") and head[5:].isdigit() else name


def detect(names: Iterable[str]) -> List[str]:
    """The conventions a dump's names follow (several: ONNX node paths of a GPT-2, a GGUF
    family refinement and the GGUF base), in the order their rules apply."""
    found = set()
    has_gate = False
    sample = list(names)
    for name in sample:
        for c in _CONVENTIONS:
            if c.name not in found and re.search(c.signature, name):
                found.add(c.name)
        if re.search(r"(^|/)blk\.\d+\.ffn_gate" + _E, name):
            has_gate = True
    if "gguf-phi3" in found:
        found.discard("gguf-phi3")
        if not has_gate and "gguf-gpt2" not in found:
            found.add("gguf-phi3+")
    if found & {"gguf-gemma2", "gguf-gpt2", "gguf-phi3+"}:
        found.add("gguf")
    if "onnx-node-paths" in found:
        # the other conventions are recognised on the dotted form
        dotted = [_apply(_BY_NAME["onnx-node-paths"].rules, n) for n in sample
                  if re.search(_BY_NAME["onnx-node-paths"].signature, n)]
        found |= set(detect(dotted)) - {"onnx-node-paths"}
    order = ["onnx-node-paths", "gguf-gemma2", "gguf-gpt2", "gguf-phi3+", "gguf", "gpt2", "phi",
             "hf"]
    return [c for c in order if c in found]


def _rules_of(convention: str) -> List[Tuple[str, str, str]]:
    if convention == "gguf-phi3+":
        return _layer_rules(r"blk\.", [("ffn_up", "gate_up")])
    return list(_BY_NAME[convention].rules)


def _apply(rules: Sequence[Tuple[str, str, str]], name: str) -> str:
    for pattern, repl, _role in rules:
        # ECMAScript "$1" -> Python's "\g<1>"; an unmatched group is empty in both
        name = re.sub(pattern, lambda m: re.sub(r"\$(\d)", lambda g: m.group(int(g.group(1)))
                                                or "", repl), name)
    return name


def rename_rules(conventions: Sequence[str]) -> List[Tuple[str, str, str]]:
    """(regex, replacement, role) for names of these conventions to the canonical form."""
    out: List[Tuple[str, str, str]] = []
    for c in conventions:
        out += _rules_of(c)
    return out


def role_of(name: str) -> Optional[Tuple[Optional[int], str]]:
    """(layer or None, role) of a canonical name (after rename_rules), or None."""
    base = _strip_step(name)
    m = re.match(r"cache\.layers\.(\d+)\.(key|value)$", base)
    if m:
        return int(m.group(1)), "cache_k" if m.group(2) == "key" else "cache_v"
    m = re.match(r"model\.layers\.(\d+)(?=$|\.)(.*)$", base)
    layer = int(m.group(1)) if m else None
    path = "model.layers.N" + m.group(2) if m else base
    # the innermost module whose path starts the name: an op inside q_proj
    # (model.layers.0.self_attn.q_proj.MatMul) or a tuple element (...self_attn.0) has its role
    best: Optional[Tuple[int, str]] = None
    for role, canon in CANONICAL_ROLES.items():
        if ("N" in canon) == (layer is not None) and (
                path == canon or path.startswith(canon + ".") or path.startswith(canon + "#")):
            if best is None or len(canon) > best[0]:
                best = (len(canon), role)
    return (layer, best[1]) if best else None


@dataclass
class RenamePlan:
    """What llm.compare renames: the conventions of each side, the rules given to the compare
    engine (map_a / map_b, "REGEX=>REPLACEMENT"), and a table of example renames by role."""

    reference: List[str]
    candidate: List[str]
    map_a: List[str]
    map_b: List[str]
    table: List[Tuple[str, str, str, str]]   # (role, reference name, candidate name, canonical)

    def to_text(self) -> str:
        lines = [f"  names: reference {', '.join(self.reference) or 'unrecognised'}; candidate "
                 f"{', '.join(self.candidate) or 'unrecognised'}"]
        if not self.map_a and not self.map_b:
            lines.append("  names: the same convention on both sides, nothing renamed")
            return "\n".join(lines)
        lines.append("  rename table (role: reference -> canonical <- candidate; override with "
                     "--map-a/--map-b, off with --names exact):")
        for role, a, b, canon in self.table:
            lines.append(f"    {role:12s} {a or '-'} -> {canon} <- {b or '-'}")
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RenamePlan":
        return cls(list(d["reference"]), list(d["candidate"]), list(d["map_a"]),
                   list(d["map_b"]), [(t["role"], t["reference"], t["candidate"], t["canonical"])
                                      for t in d["table"]])

    def to_dict(self) -> Dict[str, Any]:
        return {"reference": self.reference, "candidate": self.candidate, "map_a": self.map_a,
                "map_b": self.map_b, "table": [dict(role=r, reference=a, candidate=b,
                                                    canonical=c) for r, a, b, c in self.table]}


def rename_plan(reference_names: Iterable[str], candidate_names: Iterable[str]) -> RenamePlan:
    """Rules that bring both sides to the canonical names when their conventions differ (none
    when they agree: the names already pair), with a table of one example per role (layer 0's
    names shown as layer N)."""
    rnames = sorted({_strip_step(n) for n in reference_names})
    cnames = sorted({_strip_step(n) for n in candidate_names})
    rconv, cconv = detect(rnames), detect(cnames)
    if rconv == cconv:
        return RenamePlan(rconv, cconv, [], [], [])
    ra, rb = rename_rules(rconv), rename_rules(cconv)
    by_role: Dict[str, List[Optional[str]]] = {}
    for side, names, rules in ((0, rnames, ra), (1, cnames, rb)):
        for n in names:
            canon = _apply(rules, n)
            got = role_of(canon)
            if got is None:
                continue
            layer, role = got
            if layer not in (None, 0) or _generic(canon) != CANONICAL_ROLES[role]:
                continue  # one row per role: layer 0's module itself, not its ops
            slot = by_role.setdefault(canon, [None, None])
            if slot[side] is None:
                slot[side] = n
    table = []
    for canon, (a, b) in by_role.items():
        got = role_of(canon)
        role = got[1] if got else "?"
        table.append((role, _generic(a), _generic(b), _generic(canon) or canon))
    order = list(CANONICAL_ROLES)
    table.sort(key=lambda t: order.index(t[0]) if t[0] in order else len(order))
    return RenamePlan(rconv, cconv, [f"{p}=>{r}" for p, r, _ in ra],
                      [f"{p}=>{r}" for p, r, _ in rb], table)


def _generic(name: Optional[str]) -> Optional[str]:
    """Layer 0 shown as layer N: `blk.0.attn_q` -> `blk.N.attn_q`."""
    if name is None:
        return None
    return re.sub(r"(layers|h|blk)([./])0(?=[./#-]|$)", r"\1\2N",
                  re.sub(r"cache_(k|v)_l0$", r"cache_\1_lN", name))
