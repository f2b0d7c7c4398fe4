"""Language-model generations (issue 31; docs/howto/llm.md): record a greedy generation step by
step with the KV cache, optionally teacher-forced with another generation's tokens, and compare
two generations: per step the logits (top-1, top-k overlap, KL, max |diff|), the first step whose
greedy token differs, and at that step the first layer beyond tolerance (driftscope.compare on
that step's tensors).

    import driftscope.llm
    driftscope.llm.record(model, prompt_ids, "ref.tdump", new_tokens=8)
    driftscope.llm.record(model, prompt_ids, "bf16.tdump", backend="hf-bf16", teacher="ref.tdump")
    print(driftscope.llm.compare("ref.tdump", "bf16.tdump").to_text())

Names: step K's tensors are ``step.K/<module path>`` (every module's output, tuples as
``<path>.I``), ``step.K/cache.layers.L.key`` / ``.value`` (the cache entries written at step K:
the positions appended by that step), ``step.K/logits`` (the last position's logits, which pick
the token). Step 0 is the prompt (prefill); step K >= 1 feeds one token. Run metadata: the
prompt, the greedy token of every step (``llm.tokens``) and the tokens fed (``llm.fed``).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._cli import OneLineParser, parse_args, refuse_output_onto_inputs, write_output
from .._entry import load_function
from .._writer import Writer
from ..errors import Error, InvalidArgumentError, UnsupportedError
from .llm_onnx import cache_layers

__all__ = ["record", "compare", "GenerationReport", "BACKENDS", "cli_main", "compare_main",
           "export_onnx"]

# backend -> (torch dtype name, compiled)
_HF = {"hf": ("float32", False), "hf-bf16": ("bfloat16", False), "hf-fp16": ("float16", False),
       "hf-compile": ("float32", True)}
# ONNX Runtime / OpenVINO on the model exported by recorders/llm_onnx.py (no optimum)
_RUNTIMES = {"ort": ("onnxruntime", "onnx onnxruntime"), "openvino": ("openvino", "openvino")}
_OTHER = ("llamacpp-f32", "llamacpp-f16", "llamacpp-q8_0", "llamacpp-q4_0")
BACKENDS = tuple(_HF) + tuple(_RUNTIMES) + _OTHER


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def unavailable_reason(backend: str) -> str:
    """Why a backend named in issue 31 cannot record here (never a fake run)."""
    if backend in _RUNTIMES:
        module, pip = _RUNTIMES[backend]
        missing = [m for m in (module, "onnx") if not _installed(m)]
        if missing:
            return (f"{backend}: {' and '.join(missing)} not installed (the model is exported "
                    f"with torch.onnx.export and run there); pip install {pip}" +
                    ("" if pip.startswith("onnx ") else " onnx"))
        return ""
    if backend.startswith("llamacpp"):
        if not _installed("llama_cpp"):
            # measured 2026-12-05: the 0.3.36 sdist, CPU backend only, 2 cores, stopped
            # unfinished after 480 s at build step 37 of 140
            return (f"{backend}: llama-cpp-python is not installed: it has no binary wheel for "
                    f"this platform on PyPI, and building its sdist compiles llama.cpp from "
                    f"source (on the 2-core development machine not finished after 8 minutes: "
                    f"37 of 140 build steps), so this environment does not carry it")
        return f"{backend}: the llama.cpp recorder is not written yet (issue 31)"
    return f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})"


def _int_list(value: Any, what: str) -> List[int]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], (list, tuple)):
        value = value[0]  # a batch of one
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidArgumentError(f"{what}: expected a list of token ids (ints) or a 1-D / "
                                   f"[1, T] tensor, got {type(value).__name__}", 1,
                                   "invalid_argument")
    return [int(v) for v in value]


def _ids_text(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _parse_ids(text: str, key: str, path: str) -> List[int]:
    try:
        return [int(t) for t in text.split(",")] if text else []
    except ValueError:
        raise InvalidArgumentError(f"{path}: metadata {key} is not a comma-separated list of "
                                   f"token ids", 1, "invalid_argument") from None


def _generation_meta(path: str) -> Dict[str, str]:
    import driftscope

    with driftscope.open(path) as d:
        meta = dict(d.metadata)
    if "llm.tokens" not in meta or "llm.prompt_ids" not in meta:
        raise InvalidArgumentError(f"{path}: not a generation dump (no llm.tokens / "
                                   f"llm.prompt_ids run metadata; record it with driftscope "
                                   f"record llm)", 1, "invalid_argument")
    return meta


def _context_length(config: Any) -> Optional[int]:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        v = getattr(config, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _load(model: Any) -> Any:
    if isinstance(model, (str, os.PathLike)):
        if not os.path.isdir(model):
            raise InvalidArgumentError(f"model {os.fspath(model)!r}: not a checkpoint folder", 1,
                                       "invalid_argument")
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(os.fspath(model), local_files_only=True)
    return model


def _tensors_of(out: Any) -> List[Tuple[str, Any]]:
    import torch

    if isinstance(out, torch.Tensor):
        return [("", out)]
    if type(out) is tuple:  # not ModelOutput (a dict): the model's own outputs are handled apart
        ts = [(f".{i}", t) for i, t in enumerate(out) if isinstance(t, torch.Tensor)]
        return [("", ts[0][1])] if len(ts) == 1 else ts
    return []


def export_onnx(model: Any, path: Union[str, "os.PathLike[str]"], *, opset: int = 17
                ) -> Dict[str, Any]:
    """The causal LM as one ONNX generation step with explicit KV-cache tensors, the graph the
    ort and openvino backends run (recorders/llm_onnx.py; docs/howto/llm.md)."""
    from .llm_onnx import export_onnx as export

    return export(model, path, opset=opset)


def record(model: Any, prompt_ids: Any, path: Union[str, "os.PathLike[str]"], *,
           new_tokens: Optional[int] = None,
           teacher: Union[None, Sequence[int], str, "os.PathLike[str]"] = None,
           backend: str = "hf", dtype: Any = None, eos: Any = "config",
           filter: str = "", onnx: Union[None, str, "os.PathLike[str]"] = None) -> Dict[str, Any]:
    """Greedy generation of `new_tokens` steps, step by step with the KV cache, every step's
    module outputs, cache entries and logits written to `path` (module docstring for names).

    model: a transformers causal LM (or a local checkpoint folder); it is not modified (a cast or
    a compile works on a copy). prompt_ids: token ids (list, 1-D or [1, T] tensor).
    teacher: the tokens to feed at steps 1.. instead of the model's own (a list, or a generation
    dump whose llm.tokens are read and whose prompt must be this prompt): every step's input is
    then the teacher's, so steps after a differing token stay comparable. new_tokens defaults to
    the teacher's length. backend: hf (float32), hf-bf16, hf-fp16, hf-compile (torch.compile:
    logits and cache only, module hooks would split the compiled graph); dtype (a torch dtype)
    overrides the backend's. eos: "config" (the model's eos_token_id), an id, or None; a
    free-running generation stops after the step that produced it.
    ort / openvino: the model exported by driftscope.llm.export_onnx (recorders/llm_onnx.py),
    float32, run by ONNX Runtime (every node output recorded, named by module scope) or OpenVINO
    (logits and cache); onnx: such an export to run instead (a patched one, or to skip the
    export's seconds).
    Returns the run metadata written."""
    import torch

    if backend not in _HF and (backend not in _RUNTIMES or unavailable_reason(backend)):
        raise UnsupportedError(unavailable_reason(backend), 5, "unsupported")
    if onnx is not None and backend not in _RUNTIMES:
        raise InvalidArgumentError(f"onnx: only for the {' and '.join(_RUNTIMES)} backends, not "
                                   f"{backend}", 1, "invalid_argument")
    if dtype is not None and backend in _RUNTIMES:
        raise InvalidArgumentError(f"dtype: the {backend} backend runs the float32 export", 1,
                                   "invalid_argument")
    dtype_name, compiled = _HF.get(backend, ("float32", False))
    tdtype = dtype if dtype is not None else getattr(torch, dtype_name)
    if isinstance(tdtype, str):
        tdtype = getattr(torch, tdtype)
    out_path = os.fspath(path)
    prompt = _int_list(prompt_ids, "prompt_ids")
    if not prompt:
        raise InvalidArgumentError("prompt_ids: empty prompt", 1, "invalid_argument")
    teacher_tokens: Optional[List[int]] = None
    teacher_desc = "none"
    if isinstance(teacher, (str, os.PathLike)):
        tpath = os.fspath(teacher)
        msg = refuse_output_onto_inputs(out_path, [tpath])
        if msg:
            raise InvalidArgumentError(msg, 1, "invalid_argument")
        meta = _generation_meta(tpath)
        tprompt = _parse_ids(meta["llm.prompt_ids"], "llm.prompt_ids", tpath)
        if tprompt != prompt:
            raise InvalidArgumentError(f"--teacher {tpath}: its prompt ({len(tprompt)} tokens) "
                                       f"is not this prompt ({len(prompt)} tokens); teacher "
                                       f"forcing needs the same prompt", 1, "invalid_argument")
        teacher_tokens = _parse_ids(meta["llm.tokens"], "llm.tokens", tpath)
        teacher_desc = os.path.basename(tpath)
    elif teacher is not None:
        teacher_tokens = _int_list(teacher, "teacher")
        teacher_desc = "tokens"
    if new_tokens is None:
        if teacher_tokens is None:
            raise InvalidArgumentError("new_tokens: required without a teacher", 1,
                                       "invalid_argument")
        new_tokens = len(teacher_tokens)
    if not isinstance(new_tokens, int) or new_tokens < 1:
        raise InvalidArgumentError(f"new_tokens={new_tokens!r}: a positive number of steps", 1,
                                   "invalid_argument")
    if teacher_tokens is not None and new_tokens > len(teacher_tokens):
        raise InvalidArgumentError(f"new_tokens={new_tokens}: the teacher has only "
                                   f"{len(teacher_tokens)} tokens", 1, "invalid_argument")
    model = _load(model)
    config = model.config
    vocab = getattr(config, "vocab_size", None)
    for what, ids in (("prompt_ids", prompt), ("teacher", teacher_tokens or [])):
        bad = [i for i in ids if i < 0 or (vocab is not None and i >= vocab)]
        if bad:
            raise InvalidArgumentError(f"{what}: token id {bad[0]} is outside the model's "
                                       f"vocabulary (vocab_size {vocab}): a tokenizer/model "
                                       f"mismatch?", 1, "invalid_argument")
    ctx = _context_length(config)
    # the last step feeds position len(prompt) + new_tokens - 2; positions start at 0
    if ctx is not None and len(prompt) + new_tokens - 1 > ctx:
        raise InvalidArgumentError(
            f"the prompt ({len(prompt)} tokens) and {new_tokens} new tokens need "
            f"{len(prompt) + new_tokens - 1} positions; the model's context is {ctx} "
            f"(max_position_embeddings)", 1, "invalid_argument")
    eos_id = getattr(config, "eos_token_id", None) if eos == "config" else eos
    if isinstance(eos_id, (list, tuple)):
        eos_id = eos_id[0] if eos_id else None

    if backend in _RUNTIMES:
        from .llm_onnx import generate

        steps, tokens, fed, stopped, extra = generate(
            backend, model, prompt, new_tokens, teacher_tokens, eos_id,
            None if onnx is None else os.fspath(onnx))
        return _write(out_path, filter, model, steps, tokens, fed, dict(
            extra, backend=backend, precision="float32", model=type(model).__name__),
            prompt, new_tokens, teacher_desc, stopped, eos_id)

    params = list(model.parameters())
    if params and params[0].dtype != tdtype:
        model = copy.deepcopy(model).to(tdtype)  # the caller's model keeps its dtype
    model.eval()
    device = next(model.parameters()).device if params else torch.device("cpu")
    runner = torch.compile(model) if compiled else model

    # transformers 5 renamed past_key_values to cache (the old name still works, with a warning)
    import inspect

    cache_arg = ("cache" if "cache" in inspect.signature(model.forward).parameters
                 else "past_key_values")
    captured: List[Tuple[str, str, Any]] = []
    handles = []
    if not compiled:
        def hook(name: str, op: str) -> Any:
            def fn(_mod: Any, _args: Any, out: Any) -> None:
                for suffix, t in _tensors_of(out):
                    captured.append((name + suffix, op, t.detach().to("cpu", copy=True)))
            return fn

        for name, module in model.named_modules():
            if name:
                handles.append(module.register_forward_hook(hook(name, type(module).__name__)))

    steps: List[List[Tuple[str, str, Any]]] = []
    tokens: List[int] = []
    fed: List[int] = []
    stopped = f"new_tokens ({new_tokens})"
    cache = None
    try:
        with torch.no_grad():
            for k in range(new_tokens):
                ids = prompt if k == 0 else [fed[-1]]
                captured.clear()
                # the cache grows in place: its length before the call is where this step writes
                before = 0 if cache is None else int(cache.get_seq_length())
                out = runner(input_ids=torch.tensor([ids], device=device), use_cache=True,
                             **{cache_arg: cache})
                cache = getattr(out, cache_arg)
                rows = list(captured)
                for layer, (kk, vv) in enumerate(cache_layers(cache)):
                    for part, t in (("key", kk), ("value", vv)):
                        if t is not None:  # the positions this step appended (seq axis -2)
                            rows.append((f"cache.layers.{layer}.{part}", "KVCache",
                                         t[..., before:, :].detach().to("cpu", copy=True)))
                logits = out.logits[0, -1].detach().to("cpu", copy=True)
                rows.append(("logits", "Logits", logits))
                steps.append(rows)
                token = int(logits.float().argmax())
                tokens.append(token)
                if teacher_tokens is not None:
                    fed.append(teacher_tokens[k])
                else:
                    fed.append(token)
                    if eos_id is not None and token == eos_id and k + 1 < new_tokens:
                        stopped = f"eos (token {token}) at step {k}"
                        break
    finally:
        for h in handles:
            h.remove()

    return _write(out_path, filter, model, steps, tokens, fed, {
        "framework": "transformers", "backend": backend,
        "precision": str(tdtype).replace("torch.", ""), "model": type(model).__name__,
        "llm.intermediates": ("logits and cache only (torch.compile: module hooks would split "
                              "the compiled graph)" if compiled else "every module's output")},
        prompt, new_tokens, teacher_desc, stopped, eos_id)


def _write(out_path: str, filter: str, model: Any, steps: List[List[Tuple[str, str, Any]]],
           tokens: List[int], fed: List[int], backend_meta: Dict[str, Any], prompt: List[int],
           new_tokens: int, teacher_desc: str, stopped: str, eos_id: Any) -> Dict[str, Any]:
    meta: Dict[str, Any] = dict(backend_meta)
    meta.update({
        "llm.prompt_ids": _ids_text(prompt), "llm.tokens": _ids_text(tokens),
        # the token fed at steps 1..: the model's own, or the teacher's
        "llm.fed": _ids_text(fed[:len(tokens) - 1]), "llm.steps": str(len(tokens)),
        "llm.new_tokens": str(new_tokens), "llm.teacher": teacher_desc, "llm.stopped": stopped,
        "llm.eos_token_id": "none" if eos_id is None else str(eos_id)})
    ref = getattr(model, "driftscope_reference", None)
    if ref:
        meta["reference.init"] = json.dumps(ref, sort_keys=True, separators=(",", ":"))
    # written after the generation: the tokens are run metadata, which the header holds
    with Writer(out_path, meta, filter) as w:
        for k, rows in enumerate(steps):
            for name, op, t in rows:
                w.write(f"step.{k}/{name}", t.contiguous(), op_type=op)
    return meta


# -- comparing two generations ----------------------------------------------------------------

def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = np.max(x)
    return x - m - math.log(float(np.sum(np.exp(x - m))))


def _step_logits(d: Any, path: str, k: int) -> np.ndarray:
    """``step.K/logits`` of a generation dump as the vocabulary vector, float64: stored as [V],
    or with leading batch / time axes of length 1 ([1, V], [1, 1, V]: squeezed). A real batch or
    time axis, a scalar or an empty vocabulary is bad input: one line naming the tensor, its
    shape, its record's offset and what is expected (checked from the record's header, before
    its payload is read)."""
    name = f"step.{k}/logits"
    r = d.find(name)
    if r is None:
        return d.get(name)  # NotFoundError, with the names it might have meant
    shape = tuple(int(n) for n in r.shape)
    if not shape or shape[-1] < 1 or any(n != 1 for n in shape[:-1]):
        raise InvalidArgumentError(
            f"{path}: {name} (record at offset {r.offset}) has shape {list(shape)}; expected "
            f"the last position's logits over the vocabulary: [V] with V >= 1, or [1, V] / "
            f"[1, 1, V] (batch and time axes of length 1)", 1, "invalid_argument")
    return np.asarray(r.numpy("float64"), dtype=np.float64).reshape(shape[-1])


def _nonfinite(x: np.ndarray) -> Optional[Dict[str, int]]:
    """How many NaN, +Inf and -Inf a logits vector holds; None when it is all finite."""
    if bool(np.isfinite(x).all()):
        return None
    return {"nan": int(np.isnan(x).sum()), "posinf": int(np.isposinf(x).sum()),
            "neginf": int(np.isneginf(x).sum())}


def _nonfinite_words(c: Optional[Dict[str, int]]) -> str:
    if not c:
        return "finite"
    return ", ".join(f"{c[key]} {word}" for key, word in
                     (("nan", "NaN"), ("posinf", "+Inf"), ("neginf", "-Inf")) if c[key])


def _nonfinite_line(d: Dict[str, Any]) -> Optional[str]:
    """The non-finite logits finding in words (text and Markdown share it), or None."""
    ks = d.get("non_finite_steps")
    if not ks:
        return None
    nf = d["steps"][ks[0]]["non_finite"]
    return (f"non-finite logits (NaN/Inf: no softmax, a silent failure) at {len(ks)} of "
            f"{d['compared_steps']} steps; first at step {ks[0]}: reference "
            f"{_nonfinite_words(nf['reference'])}; candidate {_nonfinite_words(nf['candidate'])}")


def _rule_num(v: Any) -> Any:
    """A number of the compare's reference64 rule: a non-finite one comes as a string."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _g(v: Any) -> str:
    """A number as {:.3g}; the compare gives None for a statistic of NaN/Inf values."""
    return "NaN/Inf" if v is None else f"{v:.3g}"


def _max_nan(xs: List[float]) -> Optional[float]:
    """max() that a NaN wins (Python's max() keeps or drops a NaN by its position)."""
    if not xs:
        return None
    return math.nan if any(math.isnan(x) for x in xs) else max(xs)


def _json_safe(x: Any) -> Any:
    """NaN / Inf as null: JSON has no such numbers (as the compare and guard reports)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


class GenerationReport:
    """What :func:`compare` found: ``steps`` (per step: top1_agree, topk_overlap, kl,
    max_abs_diff, inputs_identical, ref_token, cand_token), ``first_flip`` (the first step whose
    greedy tokens differ, or None), ``first_crossing`` (the first tensor beyond tolerance over
    every compared step), ``flip_layer`` (the first tensor beyond tolerance at the flip step),
    ``unmatched`` (steps one run has and the other lacks, and why), ``non_finite_steps`` (the
    steps whose logits hold NaN/Inf in either run: verdict ``non_finite``, exit code 3; each
    such step's ``non_finite`` counts them per run)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["data"][key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def exit_code(self) -> int:
        # 3: a silent failure (NaN/Inf logits), as the driftscope executable's exit codes
        v = self.data["verdict"]
        return 0 if v == "pass" else 3 if v == "non_finite" else 1

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(_json_safe(self.data), indent=indent, sort_keys=False,
                          allow_nan=False)

    def to_markdown(self) -> str:
        d = self.data
        lines = [f"# Generation compare: `{d['reference']}` vs `{d['candidate']}`", "",
                 f"**Verdict: {d['verdict']}**; steps compared {d['compared_steps']} (reference "
                 f"{d['reference_steps']}, candidate {d['candidate_steps']}); teacher-forced "
                 f"{d['teacher_forced']}", ""]
        nfl = _nonfinite_line(d)
        if nfl:
            lines.append(f"- {nfl}")
        if d["first_flip"] is None:
            lines.append(f"- no greedy token flipped in {d['compared_steps']} steps")
        else:
            s = d["steps"][d["first_flip"]]
            lines.append(f"- first flipped token: step {d['first_flip']} (reference "
                         f"{s['ref_token']}, candidate {s['cand_token']})")
            fl = d.get("flip_layer")
            lines.append(f"- first layer beyond tolerance at step {d['first_flip']}: " +
                         (f"`{fl['name']}` ({fl['status']})" if fl else "none"))
        fc = d.get("first_crossing")
        lines.append("- first tensor beyond tolerance over all steps: " +
                     (f"`{fc['name']}` (step {fc['step']})" if fc else "none"))
        fk = d.get("first_cache")
        if fk:
            lines.append(f"- first KV-cache entry beyond tolerance: `{fk['name']}`")
        r64 = _r64_lines(d)
        if r64:
            lines += ["", "## " + r64[0], ""]
            lines += [("  " if l.startswith("  ") else "") + "- " + l.strip() for l in r64[1:]]
        if d["unmatched"]:
            lines.append(f"- not compared: {d['unmatched']}")
        lines += ["", "| step | ref | cand | top-1 | top-k | KL | max abs diff | inputs |",
                  "|---:|---:|---:|---|---:|---:|---:|---|"]
        for i, s in enumerate(d["steps"]):
            lines.append(f"| {i} | {s['ref_token']} | {s['cand_token']} | "
                         f"{'yes' if s['top1_agree'] else '**NO**'} | {s['topk_overlap']:.2f} | "
                         f"{s['kl']:.4e} | {s['max_abs_diff']:.4e} | "
                         f"{'same' if s['inputs_identical'] else 'DIFFER'} |")
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        d = self.data
        lines = [f"generation compare: {d['reference']} vs {d['candidate']}: {d['verdict']}",
                 f"  steps compared: {d['compared_steps']} (reference {d['reference_steps']}, "
                 f"candidate {d['candidate_steps']}); teacher-forced: {d['teacher_forced']}"]
        sm = d["same_inputs"]
        if sm["steps"]:
            lines.append(f"  over the {sm['steps']} steps with identical inputs: top-1 agreement "
                         f"{sm['top1_agreement']:.3f}, top-{d['top_k']} overlap "
                         f"{sm['mean_topk_overlap']:.3f}, max KL {sm['max_kl']:.3e}, max|diff| "
                         f"{sm['max_abs_diff']:.3e}")
        nfl = _nonfinite_line(d)
        if nfl:
            lines.append(f"  {nfl}")
        if d["first_flip"] is None:
            lines.append(f"  no greedy token flipped in {d['compared_steps']} steps")
        else:
            s = d["steps"][d["first_flip"]]
            lines.append(f"  first flipped token: step {d['first_flip']} (reference "
                         f"{s['ref_token']}, candidate {s['cand_token']})")
        fl = d.get("flip_layer")
        if d["first_flip"] is not None:
            lines.append(f"  first layer beyond tolerance at step {d['first_flip']}: " +
                         (f"{fl['name']} ({fl['status']}, max|diff| {_g(fl['max_abs_diff'])})"
                          if fl else "none (the flip is within every tensor's tolerance)"))
        fc = d.get("first_crossing")
        lines.append("  first tensor beyond tolerance over all steps: " +
                     (f"{fc['name']} (step {fc['step']})" if fc else "none"))
        fk = d.get("first_cache")
        if fk:
            lines.append(f"  first KV-cache entry beyond tolerance: {fk['name']} "
                         f"({fk['status']}, max|diff| {_g(fk['max_abs_diff'])})")
        for line in _r64_lines(d):
            lines.append("  " + line)
        if d.get("names") and (d["names"]["map_a"] or d["names"]["map_b"]):
            from .llm_names import RenamePlan

            lines.append(RenamePlan.from_dict(d["names"]).to_text())
        if d["unmatched"]:
            lines.append(f"  not compared: {d['unmatched']}")
        lines.append("  step  ref  cand  top1  top-k   KL          max|diff|  inputs")
        for i, s in enumerate(d["steps"]):
            lines.append(f"  {i:4d} {s['ref_token']:4d} {s['cand_token']:5d}  "
                         f"{'yes' if s['top1_agree'] else 'NO ':4s} {s['topk_overlap']:.2f}  "
                         f"{s['kl']:.4e}  {s['max_abs_diff']:.4e}  "
                         f"{'same' if s['inputs_identical'] else 'DIFFER'}")
        return "\n".join(lines)


_WHY = {"first_flip": "the first flipped token", "first_crossing": "the first tensor beyond "
        "tolerance"}


def _r64_lines(d: Dict[str, Any]) -> List[str]:
    """The float64 ordering rule's findings in words (text and Markdown share them)."""
    r = d.get("reference64")
    if not r:
        return []
    out = [f"float64 ordering rule (reference64 {r['path']}): error(candidate, float64) <= k x "
           f"error(float32, float64) + floor"]
    for e in r["steps"]:
        head = f"at step {e['step']} ({_WHY[e['why']]}): "
        lay = e["layer"]
        if lay:
            out.append(head + f"first layer beyond the rule: {lay['name']} (error vs float64 "
                       f"{lay['error_candidate']:.3g} > limit {lay['limit']:.3g} = "
                       f"{lay['k']:g} x float32's own {lay['error_reference']:.3g} + floor; " +
                       (f"{lay['ratio']:.3g}x the limit)" if lay["ratio"] is not None
                        else "a limit of 0)"))
        else:
            out.append(head + "no layer beyond the float64 ordering rule: " +
                       ("the flip is within rounding" if e["why"] == "first_flip"
                        else "within rounding"))
        v = e["evidence"]
        x, y = v["pair"]
        lr = v["logits_rule"]
        rmse = (f" (RMSE {lr['error_candidate']:.3g}, limit {lr['limit']:.3g}; float32's "
                f"{lr['error_reference']:.3g})" if lr else "")
        out.append(f"  evidence: the reference's top-2 margin {v['reference_margin']:.3g} "
                   f"(tokens {v['reference_top2'][0]}, {v['reference_top2'][1]}); float64 picks "
                   f"{v['float64_token']}, its logit {x} - logit {y} = {v['float64_margin']:.3g}, "
                   f"the candidate's {v['candidate_margin']:.3g}; the logits' max error vs "
                   f"float64: candidate {v['logits_max_error_candidate']:.3g}, float32 "
                   f"{v['logits_max_error_reference']:.3g}" + rmse)
    return out


def _step_of(name: str) -> Optional[int]:
    head, sep, _ = name.partition("/")
    if sep and head.startswith("step.") and head[5:].isdigit():
        return int(head[5:])
    return None


def _pair_dict(t: Any) -> Dict[str, Any]:
    keep = ("name", "status", "max_abs_diff", "cosine", "rel_l2", "op_type")
    return {k: t.get(k) for k in keep}


def compare(reference: Union[str, "os.PathLike[str]"], candidate: Union[str, "os.PathLike[str]"],
            *, top_k: int = 5, names: str = "auto", **compare_options: Any) -> GenerationReport:
    """Two generation dumps (record()): per step the last position's logits (top-1 agreement,
    top-k overlap, KL(reference || candidate), max |diff|), the first step whose greedy tokens
    differ, and the first tensor beyond tolerance at that step, found by driftscope.compare
    filtered to that step (compare_options go to it: atol, rtol, policy, reference64, ...).
    names: "auto" recognises each side's naming convention (transformers Llama / GPT-2 / Phi
    paths, GGUF blk.N names, ONNX node paths; recorders/llm_names.py) and, where they differ,
    renames both to one canonical form through map_a / map_b (the report's ``names`` holds the
    rules and a rename table); map_a / map_b given here replace that side's rules; "exact"
    renames nothing.
    reference64 (a float64 generation teacher-forced with the reference: record(...,
    dtype=torch.float64, teacher=REF)): also applies the float64 ordering rule at the first
    flipped step and at the first step beyond tolerance (the report's ``reference64``: the first
    tensor beyond the rule there, or none, with the logit-margin evidence).
    top_k: an integer >= 1, clamped to the vocabulary size. Logits are [V], or [1, V] /
    [1, 1, V] (squeezed); another shape is bad input. NaN/Inf logits in either run make the
    verdict ``non_finite`` (exit_code 3) and that step's KL NaN."""
    import driftscope

    from .llm_names import rename_plan

    if names not in ("auto", "exact"):
        raise InvalidArgumentError(f"names={names!r}: 'auto' or 'exact'", 1, "invalid_argument")
    if not isinstance(top_k, (int, np.integer)) or isinstance(top_k, bool) or top_k < 1:
        raise InvalidArgumentError(f"top_k={top_k!r}: must be an integer >= 1 (clamped to the "
                                   f"vocabulary size)", 1, "invalid_argument")
    top_k = int(top_k)

    rpath, cpath = os.fspath(reference), os.fspath(candidate)
    rmeta, cmeta = _generation_meta(rpath), _generation_meta(cpath)
    r64 = compare_options.get("reference64")
    if r64 is not None:
        r64 = os.fspath(r64)
        _check_reference64(rpath, rmeta, r64)
    rprompt = _parse_ids(rmeta["llm.prompt_ids"], "llm.prompt_ids", rpath)
    cprompt = _parse_ids(cmeta["llm.prompt_ids"], "llm.prompt_ids", cpath)
    if rprompt != cprompt:
        raise InvalidArgumentError(f"{cpath}: its prompt is not the reference's ({len(cprompt)} "
                                   f"vs {len(rprompt)} tokens): no step is comparable", 1,
                                   "invalid_argument")
    rtok = _parse_ids(rmeta["llm.tokens"], "llm.tokens", rpath)
    ctok = _parse_ids(cmeta["llm.tokens"], "llm.tokens", cpath)
    rfed = _parse_ids(rmeta.get("llm.fed", ""), "llm.fed", rpath)
    cfed = _parse_ids(cmeta.get("llm.fed", ""), "llm.fed", cpath)
    n = min(len(rtok), len(ctok))
    unmatched = ""
    if len(rtok) != len(ctok):
        longer, who = (rpath, "candidate") if len(rtok) > len(ctok) else (cpath, "reference")
        shorter_meta = cmeta if who == "candidate" else rmeta
        unmatched = (f"steps {n}..{max(len(rtok), len(ctok)) - 1} of {os.path.basename(longer)} "
                     f"have no {who} step (the {who} stopped: "
                     f"{shorter_meta.get('llm.stopped', '?')})")
    steps: List[Dict[str, Any]] = []
    k_used = 0  # top_k clamped to the vocabulary size: the k the overlaps measure
    with driftscope.open(rpath) as rd, driftscope.open(cpath) as cd:
        for k in range(n):
            a, b = _step_logits(rd, rpath, k), _step_logits(cd, cpath, k)
            if a.shape != b.shape:
                raise InvalidArgumentError(f"step {k}: logits of {a.shape} vs {b.shape}: the two "
                                           f"models have different vocabularies", 1,
                                           "invalid_argument")
            kk = min(top_k, a.size)
            k_used = max(k_used, kk)
            ta = set(np.argsort(-a, kind="stable")[:kk].tolist())
            tb = set(np.argsort(-b, kind="stable")[:kk].tolist())
            bad_a, bad_b = _nonfinite(a), _nonfinite(b)
            with np.errstate(all="ignore"):
                if bad_a or bad_b:  # no softmax: the KL is undefined (NaN), a silent failure
                    kl = math.nan
                else:
                    la, lb = _log_softmax(a), _log_softmax(b)
                    pa = np.exp(la)
                    kl = float(np.sum(np.where(pa > 0, pa * (la - lb), 0.0)))
                # NaN where an Inf meets an Inf of the same sign or a NaN, Inf against finite
                mad = float(np.max(np.abs(a - b)))
            same_in = k == 0 or (k - 1 < len(rfed) and k - 1 < len(cfed)
                                 and rfed[k - 1] == cfed[k - 1])
            steps.append({"ref_token": rtok[k], "cand_token": ctok[k],
                          "top1_agree": rtok[k] == ctok[k], "topk_overlap": len(ta & tb) / kk,
                          "kl": kl, "max_abs_diff": mad,
                          "inputs_identical": bool(same_in),
                          "non_finite": ({"reference": bad_a, "candidate": bad_b}
                                         if bad_a or bad_b else None)})
    non_finite_steps = [k for k, s in enumerate(steps) if s["non_finite"]]
    first_flip = next((k for k, s in enumerate(steps) if not s["top1_agree"]), None)
    teacher_forced = all(s["inputs_identical"] for s in steps)
    opts = dict(compare_options)
    opts.setdefault("allow_unpaired", True)
    plan = None
    if names == "auto":
        with driftscope.open(rpath) as rd, driftscope.open(cpath) as cd:
            plan = rename_plan(rd.names(), cd.names())
        for key, rules in (("map_a", plan.map_a), ("map_b", plan.map_b)):
            if rules and not opts.get(key):
                opts[key] = rules
    # the steps both runs have: every step when they agree, else the shorter list of clauses
    longest = max(len(rtok), len(ctok))
    common = ("" if longest == n else " ".join(f"step.{k}/*" for k in range(n))
              if n <= longest - n else " ".join(f"-step.{k}/*" for k in range(n, longest)))
    whole = driftscope.compare(rpath, cpath, filter=common, **opts)
    fc = whole.first_divergence
    # the first cache entry beyond tolerance, by step then layer: where a carried error was
    # written (the cache names are the recorders' own, the same in every backend)
    first_cache = None
    for t in whole.tensors:
        tail = str(t.get("name")).partition("/")[2]
        if tail.startswith("cache.layers.") and t.get("status") not in ("pass", None):
            first_cache = dict(_pair_dict(t), step=_step_of(str(t.get("name"))))
            break
    first_crossing = None
    if fc is not None:
        first_crossing = dict(_pair_dict(fc), step=_step_of(str(fc.get("name"))))
    flip_layer = None
    flip_at = None
    if first_flip is not None:
        flip_at = driftscope.compare(rpath, cpath, filter=f"step.{first_flip}/*", **opts)
        if flip_at.first_divergence is not None:
            flip_layer = _pair_dict(flip_at.first_divergence)
    r64_steps = None
    if r64 is not None:
        wanted = [(first_flip, "first_flip", flip_at)]
        # the same step judged once: the flip's entry already holds it
        if first_crossing is not None and first_crossing["step"] not in (None, first_flip):
            wanted.append((first_crossing["step"], "first_crossing", None))
        r64_steps = [_rule_at(rpath, cpath, r64, k, why, at_k, opts, rtok, ctok)
                     for k, why, at_k in wanted if k is not None]
    verdict = "non_finite" if non_finite_steps else (
        "pass" if first_flip is None and first_crossing is None and not unmatched else
        "token_flip" if first_flip is not None else "diverged" if first_crossing else
        "steps_differ")
    # over the steps whose inputs were identical: after a free-running flip the rest measure
    # different contexts, not the runtime
    same = [s for s in steps if s["inputs_identical"]]
    summary = {"steps": len(same),
               "top1_agreement": sum(s["top1_agree"] for s in same) / len(same) if same else None,
               "mean_topk_overlap": (sum(s["topk_overlap"] for s in same) / len(same)
                                     if same else None),
               "max_kl": _max_nan([s["kl"] for s in same]),
               "max_abs_diff": _max_nan([s["max_abs_diff"] for s in same])}
    return GenerationReport({
        "reference": rpath, "candidate": cpath, "verdict": verdict, "same_inputs": summary,
        "reference_backend": rmeta.get("backend"), "candidate_backend": cmeta.get("backend"),
        "reference_steps": len(rtok), "candidate_steps": len(ctok), "compared_steps": n,
        "teacher_forced": teacher_forced, "top_k": k_used or top_k, "first_flip": first_flip,
        "non_finite_steps": non_finite_steps,
        "first_cache": first_cache, "names": plan.to_dict() if plan else None,
        "flip_layer": flip_layer, "first_crossing": first_crossing, "unmatched": unmatched,
        "reference64": None if r64 is None else {
            "path": r64, "r64_k": opts.get("r64_k") or None, "r64_floor": opts.get("r64_floor"),
            "steps": r64_steps},
        "steps": steps})


def _check_reference64(rpath: str, rmeta: Dict[str, str], r64: str) -> None:
    """The float64 run must be the reference's generation: same prompt, same tokens fed at every
    step (teacher-forced with it), or its steps measure another context."""
    meta = _generation_meta(r64)
    if meta.get("precision", "float64") != "float64":
        raise InvalidArgumentError(f"--reference64 {r64}: recorded in {meta['precision']}, not "
                                   f"float64 (record llm --dtype float64)", 1, "invalid_argument")
    if _parse_ids(meta["llm.prompt_ids"], "llm.prompt_ids", r64) != _parse_ids(
            rmeta["llm.prompt_ids"], "llm.prompt_ids", rpath):
        raise InvalidArgumentError(f"--reference64 {r64}: its prompt is not the reference's", 1,
                                   "invalid_argument")
    rfed = _parse_ids(rmeta.get("llm.fed", ""), "llm.fed", rpath)
    ffed = _parse_ids(meta.get("llm.fed", ""), "llm.fed", r64)
    for j, (x, y) in enumerate(zip(rfed, ffed)):
        if x != y:
            raise InvalidArgumentError(
                f"--reference64 {r64}: step {j + 1} was fed token {y}, the reference's step was "
                f"fed {x}: record the float64 run teacher-forced with the reference "
                f"(--teacher {os.path.basename(rpath)})", 1, "invalid_argument")


def _rule_at(rpath: str, cpath: str, r64: str, k: int, why: str, at: Any,
             opts: Dict[str, Any], rtok: List[int], ctok: List[int]) -> Dict[str, Any]:
    """The float64 ordering rule at step k (the library's compare with reference64=, filtered
    to the step): the first tensor it fails, or none, and the evidence either way: the
    reference's top-2 logit margin against the logits' error vs float64 of both runs."""
    import driftscope

    with driftscope.open(r64) as fd:
        if f"step.{k}/logits" not in set(fd.names()):
            raise InvalidArgumentError(f"--reference64 {r64}: has no step {k} (its "
                                       f"{fd.metadata.get('llm.steps', '?')} steps end before "
                                       f"the step to judge)", 1, "invalid_argument")
        c = _step_logits(fd, r64, k)
    with driftscope.open(rpath) as rd, driftscope.open(cpath) as cd:
        a, b = _step_logits(rd, rpath, k), _step_logits(cd, cpath, k)
    if c.shape != a.shape or a.size < 2:
        raise InvalidArgumentError(f"--reference64 {r64}: step {k}: logits of {c.shape}, the "
                                   f"reference's {a.shape}: the rule's evidence needs the same "
                                   f"vocabulary, of 2 tokens or more", 1, "invalid_argument")
    if at is None:
        at = driftscope.compare(rpath, cpath, filter=f"step.{k}/*", **opts)
    layer = None
    logits_rule = None
    for t in at.tensors:
        rule = t.get("reference64")
        if not rule:
            continue
        if str(t.get("name")) == f"step.{k}/logits":
            logits_rule = {key: _rule_num(v) for key, v in rule.items()}
        if layer is None and any(r.get("code") == "reference64" for r in t.get("reasons") or ()):
            e_c, e_r, lim = (float(_rule_num(rule[key]))
                             for key in ("error_candidate", "error_reference", "limit"))
            layer = dict(_pair_dict(t), error_candidate=e_c, error_reference=e_r, limit=lim,
                         k=_rule_num(rule["k"]), ratio=e_c / lim if lim > 0 else None)
    order = np.argsort(-a, kind="stable")
    t1, t2 = int(order[0]), int(order[1])
    # the two tokens that matter: the flipped pair, else the reference's top two
    x, y = (rtok[k], ctok[k]) if rtok[k] != ctok[k] else (t1, t2)
    if not (0 <= x < a.size and 0 <= y < a.size):
        raise InvalidArgumentError(f"step {k}: tokens {x} and {y} (llm.tokens) are not both in "
                                   f"the logits' vocabulary of {a.size}", 1, "invalid_argument")
    with np.errstate(all="ignore"):  # NaN/Inf logits give NaN/Inf margins, not warnings
        evidence = {
            "reference_top2": [t1, t2], "reference_margin": float(a[t1] - a[t2]),
            "float64_token": int(np.argmax(c)), "float64_margin": float(c[x] - c[y]),
            "pair": [x, y], "candidate_margin": float(b[x] - b[y]),
            "logits_max_error_candidate": float(np.max(np.abs(b - c))),
            "logits_max_error_reference": float(np.max(np.abs(a - c))),
            "logits_rule": logits_rule}
    return {"step": k, "why": why, "layer": layer,
            "verdict": "beyond_rule" if layer else "within_rounding", "evidence": evidence}


# -- command lines --------------------------------------------------------------------------------

def _error(verb: str, e: BaseException) -> int:
    print(f"driftscope {verb}: error: {e}", file=sys.stderr)
    return 2


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="driftscope record llm",
        description="Record a greedy generation of a causal LM step by step (docs/howto/llm.md).")
    p.add_argument("--model", required=True, metavar="FILE.py:FN",
                   help="a function returning (model, prompt_ids): a transformers causal LM (or "
                        "a local checkpoint folder's path) and the prompt's token ids")
    p.add_argument("--backend", default="hf", metavar="NAME",
                   help=f"one of {', '.join(BACKENDS)} (default hf: float32 eager)")
    p.add_argument("--new-tokens", type=int, default=None, metavar="N",
                   help="steps to generate (default: the teacher's length)")
    p.add_argument("--dtype", default=None, choices=("float32", "float64", "bfloat16", "float16"),
                   help="transformers backends: run in this dtype instead of the backend's "
                        "(float64: the reference64 run of llm-compare --reference64)")
    p.add_argument("--teacher", default=None, metavar="REF.tdump",
                   help="feed this generation's tokens at every step (teacher forcing)")
    p.add_argument("--eos", default="config", metavar="ID|none",
                   help="stop a free-running generation after this token (default: the "
                        "model's eos_token_id)")
    p.add_argument("--onnx", default=None, metavar="STEP.onnx",
                   help="ort / openvino: run this export (driftscope.llm.export_onnx, or one "
                        "patched from it) instead of exporting the model")
    p.add_argument("-o", "--output", required=True, metavar="OUT.tdump")
    a = parse_args(p, argv)
    try:
        msg = refuse_output_onto_inputs(a.output, [a.model.rpartition(":")[0]] +
                                        ([a.teacher] if a.teacher else []) +
                                        ([a.onnx] if a.onnx else []))
        if msg:
            raise InvalidArgumentError(msg, 1, "invalid_argument")
        if a.backend not in BACKENDS:
            raise InvalidArgumentError(unavailable_reason(a.backend), 1, "invalid_argument")
        eos: Any = a.eos
        if eos not in ("config",):
            eos = None if eos == "none" else int(eos)
        got = load_function(a.model)()
        if not isinstance(got, tuple) or len(got) != 2:
            raise InvalidArgumentError(f"--model {a.model}: must return (model, prompt_ids)", 1,
                                       "invalid_argument")
        meta = record(got[0], got[1], a.output, new_tokens=a.new_tokens, teacher=a.teacher,
                      backend=a.backend, eos=eos, onnx=a.onnx, dtype=a.dtype)
    except (Error, ValueError, OSError) as e:
        return _error("record llm", e)
    print(f"{a.output}: {meta['llm.steps']} steps, tokens {meta['llm.tokens']} "
          f"(stopped: {meta['llm.stopped']}; teacher: {meta['llm.teacher']})")
    return 0


def _top_k(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 1 (clamped to the "
                                         f"vocabulary size)")
    return k


def compare_main(argv: Optional[Sequence[str]] = None) -> int:
    p = OneLineParser(
        prog="driftscope llm-compare",
        description="Compare two generations recorded by 'driftscope record llm': per-step "
                    "logits, the first flipped token, the first layer beyond tolerance at that "
                    "step. Exit 0 when they agree, 1 when they diverge, 2 on bad input, 3 when "
                    "either run's logits hold NaN/Inf (a silent failure). Logits are [V], or "
                    "[1, V] / [1, 1, V] (batch and time axes of length 1).")
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--top-k", type=_top_k, default=5, metavar="K",
                   help="the per-step top-k overlap of the two runs' token sets: an integer >= 1 "
                        "(default 5), clamped to the vocabulary size")
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write a self-contained HTML page: the growth chart over steps x "
                        "layers (a heatmap of each layer's relative error) and the per-step table")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the report as JSON")
    p.add_argument("--markdown", default=None, metavar="FILE",
                   help="also write the report as Markdown")
    p.add_argument("--reference64", default=None, metavar="R64.tdump",
                   help="the reference's generation recorded in float64 (record llm --dtype "
                        "float64 --teacher REF): the float64 ordering rule at the first flipped "
                        "step and the first step beyond tolerance, with the logit-margin evidence")
    p.add_argument("--r64-k", action="append", default=[], metavar="DTYPE=K",
                   help="the rule's multiplier per candidate dtype, e.g. bf16=3 (as compare)")
    p.add_argument("--r64-floor", type=float, default=None, metavar="F",
                   help="the rule's floor factor (as compare; default 1)")
    p.add_argument("--names", choices=("auto", "exact"), default="auto",
                   help="auto (default): recognise each side's naming convention (transformers, "
                        "GPT-2, Phi, GGUF blk.N, ONNX node paths) and rename both to one "
                        "canonical form where they differ, printing the rename table; exact: "
                        "pair names as they are")
    p.add_argument("--map-a", action="append", default=[], metavar="'REGEX=>REPLACEMENT'",
                   help="rename rule for reference names (replaces the automatic ones)")
    p.add_argument("--map-b", action="append", default=[], metavar="'REGEX=>REPLACEMENT'",
                   help="rename rule for candidate names (replaces the automatic ones)")
    try:
        a = parse_args(p, argv)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        ins = [a.reference, a.candidate] + ([a.reference64] if a.reference64 else [])
        outs = [o for o in (a.json, a.html, a.markdown) if o]
        for out in outs:
            msg = refuse_output_onto_inputs(out, ins)
            if msg:
                raise InvalidArgumentError(msg, 1, "invalid_argument")
        if len({os.path.abspath(o) for o in outs}) < len(outs):
            raise InvalidArgumentError("--json, --html and --markdown name the same file", 1,
                                       "invalid_argument")
        for f in ins:
            if not os.path.isfile(f):
                raise InvalidArgumentError(f"{f}: no such file", 1, "invalid_argument")
        opts = {k: v for k, v in (("atol", a.atol), ("rtol", a.rtol), ("map_a", a.map_a),
                                  ("map_b", a.map_b), ("reference64", a.reference64),
                                  ("r64_k", a.r64_k)) if v}
        if a.r64_floor is not None:
            opts["r64_floor"] = a.r64_floor
        rep = compare(a.reference, a.candidate, top_k=a.top_k, names=a.names, **opts)
        if a.json:
            write_output(a.json, rep.to_json() + "\n")
        if a.markdown:
            write_output(a.markdown, rep.to_markdown())
        if a.html:  # the growth chart: llm_heatmap.py
            from . import llm_heatmap

            with np.errstate(all="ignore"):  # NaN/Inf logits: grey cells, not warnings
                page = llm_heatmap.to_html(rep)
            write_output(a.html, page)
    except (Error, ValueError, OSError) as e:
        return _error("llm-compare", e)
    print(rep.to_text())
    return rep.exit_code
