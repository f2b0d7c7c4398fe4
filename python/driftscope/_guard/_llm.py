"""``driftscope guard --model FILE.py:FN`` when FN gives a causal language model (issue 31 item 4;
docs/howto/llm.md "Guard"): every backend of the generation recorder's table run against the
reference backend (hf, float32 eager) on a few prompts, each candidate teacher-forced with the
reference's tokens so every step compares the same context; verdicts on the logits of every
step, and the failing backends probed: the first step and layer beyond tolerance, as
``driftscope llm-compare`` finds them.

What is a language model here (`detect`): FN returns a transformers model that can generate, or
``(model, prompt_ids)`` with such a model, or a local checkpoint folder's path (alone or first in
the pair). Anything else is left to the PyTorch guard.

The backends run in this process, one after the other (a generation holds the model, its cast
copies and the recorded tensors; forking the model into a child per backend would copy it).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ..errors import Error, UnsupportedError
from ._metrics import (ARGMAX_FLIP, NUMERICAL_INSTABILITY, PASS, PRECISION_DEGRADATION,
                       REFERENCE, RUNTIME_ERROR, SEVERITY, UNAVAILABLE, OutputResult, Thresholds)
from ._report import BackendResult, GuardReport, reason_line

# The thresholds of the logits verdict (docs/howto/llm.md "Guard"; --max-kl, --min-topk-overlap,
# --top-k). KL(reference || candidate) in nats of the softmaxed logits, the largest over every
# step of every prompt: 1e-2 is far above bfloat16 rounding on the models measured (5.5e-7 on the
# tiny Llama) and below an error that moves probability mass visibly. The top-k overlap is the
# mean over one prompt's steps of |top-k(ref) & top-k(cand)| / k, the lowest prompt's.
DEFAULT_MAX_KL = 1e-2
DEFAULT_MIN_TOPK_OVERLAP = 0.8
DEFAULT_TOP_K = 5
DEFAULT_NEW_TOKENS = 8
DEFAULT_PROMPTS = 3
PROMPT_TOKENS = 8
REFERENCE_BACKEND = "hf"

_LAYER = re.compile(r"(?:^|[./])(?:layers|h|blk|blocks|block)\.(\d+)(?:$|[./])")


@dataclass
class LLMModel:
    """A language model found by `detect`: the model, its prompts and where they came from."""

    model: Any
    prompts: Optional[List[List[int]]]  # None: generated from the seed
    source: str


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _pretrained(obj: Any) -> bool:
    # transformers is imported by the user's function when it made one: never imported here
    tf = sys.modules.get("transformers")
    return tf is not None and isinstance(obj, getattr(tf, "PreTrainedModel", ()))


def _causal(model: Any) -> bool:
    can = getattr(model, "can_generate", None)
    try:
        return bool(can()) if callable(can) else False
    except Exception:  # noqa: BLE001 - a model whose check fails cannot generate
        return False


def _token_lists(value: Any) -> Optional[List[List[int]]]:
    """Prompts from what the function returned beside the model: ids (a list, a 1-D or [B, T]
    integer tensor or array), a list of such lists, or a dict with input_ids; None when it is
    none of these."""
    if isinstance(value, dict) and "input_ids" in value:
        value = value["input_ids"]
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "tolist"):
        if getattr(dtype, "is_floating_point", False) or getattr(dtype, "kind", "i") in "fcb?":
            return None
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [list(value)]
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(row, (list, tuple)) and row and all(
                isinstance(v, int) and not isinstance(v, bool) for v in row) for row in value):
        return [list(row) for row in value]
    return None


def _load_folder(path: str, entry: str, error: Callable[[str], Exception]) -> Any:
    if not os.path.isdir(path):
        raise error(f"--model {entry}: returned {path!r}, which is not a checkpoint folder")
    try:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - transformers raises ValueError, OSError, ...
        raise error(f"--model {entry}: {path} is not a causal LM checkpoint transformers can "
                    f"load: {_first_line(err)}") from None
    return model


def detect(entry: str, seed: int, error: Callable[[str], Exception],
           quiet: Callable[[], Any], llm_named: bool = False) -> Optional[LLMModel]:
    """Calls FN of FILE.py:FN (after torch.manual_seed(seed)) and returns the language model it
    gives, or None when it gives something else the PyTorch guard judges ((module, inputs)).

    A language model: a causal LM or a checkpoint folder's path alone, or first in a pair whose
    second item is a list (token ids, or a list of such lists). A causal LM with tensors, a
    dict or a tensor, stays the PyTorch guard's (its torch-* and onnx-* backends run the forward
    on them: docs/howto/guard.md section 11) unless `llm_named` (--backends, --reference or
    --require names a backend of the generation recorder): then its input_ids are the prompt.
    `error(message)` makes the exception for a function that returns neither; `quiet()` is the
    context in which the user's code runs (the guard's: what it prints goes to stderr)."""
    from ..recorders.api import torch_load_entry_point

    try:
        import torch

        with quiet():
            torch.manual_seed(seed)
            made = torch_load_entry_point(entry)()
    except Error as err:
        raise error(_first_line(err)) from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's code may raise anything
        raise error(f"--model {entry}: {type(err).__name__}: {_first_line(err)}") from None
    pair = isinstance(made, tuple) and len(made) == 2
    model, rest = (made[0], made[1]) if pair else (made, None)
    path = isinstance(model, (str, os.PathLike))
    if not (path or _pretrained(model)):
        if pair:
            return None  # (module, inputs): the PyTorch guard's
        kind = type(made).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise error(f"--model {entry}: the function returned {article} {kind}: expected "
                    f"(model, inputs) for a PyTorch model, or a causal LM (a transformers "
                    f"model that can generate, (model, prompt_ids), or a checkpoint folder's "
                    f"path)")
    if pair and not path and not isinstance(rest, list) and not llm_named:
        return None  # (model, tensors): the PyTorch guard's, as before language models
    prompts = _token_lists(rest) if pair else None
    if path:
        model = _load_folder(os.fspath(model), entry, error)
    elif not _causal(model):
        raise error(f"--model {entry}: {type(model).__name__} is not a causal LM (its "
                    f"can_generate() is False: no generate-able config or LM head); give a "
                    f"...ForCausalLM model")
    if pair and prompts is None:
        raise error(f"--model {entry}: the second item ({type(rest).__name__}) is not prompt "
                    f"token ids (a list of ints, a list of such lists, or an integer tensor)")
    return LLMModel(model, prompts,
                    "(model, prompt_ids)" if pair else
                    "a checkpoint folder" if path else "a causal LM")


def _context(config: Any) -> Optional[int]:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        v = getattr(config, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _layer(name: Optional[str]) -> Optional[int]:
    m = _LAYER.search(name or "")
    return int(m.group(1)) if m else None


def _probe_json(rep: Any, prompt: int) -> Dict[str, Any]:
    fc, fl = rep.first_crossing, rep.flip_layer
    return {"prompt": prompt,
            "first_crossing": fc.get("name") if fc else None,
            "first_crossing_step": fc.get("step") if fc else None,
            "first_crossing_layer": _layer(fc.get("name")) if fc else None,
            "flip_step": rep.first_flip,
            "flip_layer": fl.get("name") if fl else None,
            "flip_layer_index": _layer(fl.get("name")) if fl else None}


def _probe_sentence(name: str, p: Dict[str, Any], intermediates: str) -> str:
    where = f"{name} probe (prompt {p['prompt'] + 1}, llm-compare): "
    if p["first_crossing"] is None:
        where += "no recorded tensor crosses its tolerance"
    else:
        layer = ("" if p["first_crossing_layer"] is None
                 else f", layer {p['first_crossing_layer']}")
        where += (f"first tensor beyond tolerance {p['first_crossing']} (step "
                  f"{p['first_crossing_step']}{layer})")
    if p["flip_step"] is not None:
        where += (f"; at the first flipped step {p['flip_step']}: " +
                  (p["flip_layer"] if p["flip_layer"] else
                   "no tensor beyond tolerance (the flip is within every tensor's tolerance)"))
    if not intermediates.startswith("every"):
        where += f" (this backend records {intermediates})"
    return where + "."


class LLMGuardReport(GuardReport):
    """GuardReport of a language model: one row per backend of the recorder's table, a logits
    verdict per backend; ``llm`` (the prompts, thresholds) and each row's ``llm`` (per prompt)
    in the JSON."""

    def __init__(self, *, llm: Dict[str, Any], rows_llm: Dict[str, Dict[str, Any]],
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.llm, self.rows_llm = llm, rows_llm

    @property
    def inputs_source(self) -> str:
        return "real" if self.llm["prompts_given"] else "synthetic"

    @property
    def findings(self) -> List[str]:
        out: List[str] = []
        d = self.llm
        for b in self.backends:
            if b.reference:
                continue
            r = self.rows_llm.get(b.name) or {}
            if b.status == UNAVAILABLE:
                req = " It is required, so the guard is incomplete." if b.required else ""
                out.append(f"{b.name} was not checked: {b.reason}.{req}")
                continue
            if b.status == RUNTIME_ERROR:
                out.append(f"{b.name} failed: {reason_line(b.error or '')}")
                continue
            overlap = (f"lowest mean top-{d['top_k']} overlap {r['min_mean_topk_overlap']:.3f}"
                       if r.get("min_mean_topk_overlap") is not None else "")
            kl = "not finite" if r["max_kl"] is None else f"{r['max_kl']:.3g}"
            stats = (f"{r['flipped_steps']} of {r['steps']} teacher-forced steps flipped, max "
                     f"KL {kl}, {overlap}")
            if b.status == PASS:
                out.append(f"{b.name} matches {self.reference}: {stats}.")
            else:
                out.append(f"{b.name} {b.status}: {b.worst.detail if b.worst else stats}.")
            if r.get("probe"):
                out.append(_probe_sentence(b.name, r["probe"], r.get("intermediates", "")))
            if r.get("heatmap"):
                out.append(f"{b.name}: the growth chart over steps x layers of prompt "
                           f"{r['probe']['prompt'] + 1} is {r['heatmap']}.")
        return out

    def to_dict(self) -> Dict[str, Any]:
        data = super().to_dict()
        data["llm"] = dict(self.llm)
        for row in data["backends"]:
            row["llm"] = self.rows_llm.get(row["name"])
        return data


def _logit_stats(ref_path: str, cand_path: str, steps: int) -> Dict[str, float]:
    """Cosine, norms, max |diff| and relative L2 error of every step's logits stacked (float64),
    for the guard's table columns."""
    import driftscope

    with driftscope.open(ref_path) as r, driftscope.open(cand_path) as c:
        a = np.stack([np.asarray(r.get(f"step.{k}/logits", dtype="float64"), np.float64)
                      for k in range(steps)])
        b = np.stack([np.asarray(c.get(f"step.{k}/logits", dtype="float64"), np.float64)
                      for k in range(steps)])
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    dot = float(np.sum(a * b))
    return {"cosine": dot / (na * nb) if na > 0 and nb > 0 else float("nan"),
            "norm_ref": na, "norm_cand": nb, "max_diff": float(np.max(np.abs(a - b))),
            "rel_error": float(np.linalg.norm(b - a)) / na if na > 0 else float("nan")}


def _margin(ref_path: str, step: int) -> float:
    """The reference's top-1 minus top-2 logit at `step`: how near a tie the flipped token was."""
    import driftscope

    with driftscope.open(ref_path) as r:
        x = np.sort(np.asarray(r.get(f"step.{step}/logits", dtype="float64"), np.float64))
    return float(x[-1] - x[-2]) if x.size > 1 else float("inf")


def run(found: LLMModel, *, entry: str, error: Callable[..., Exception],
        backends: Optional[Sequence[str]], reference: Optional[str], require: Sequence[str],
        samples: Optional[int], seed: int, steps: Optional[int], max_argmax_flip: float,
        max_kl: Optional[float], min_topk_overlap: Optional[float], top_k: Optional[int],
        probe: str, out: Optional[str],
        progress: Optional[Callable[[int, int, str], None]]) -> LLMGuardReport:
    """The guard of a language model (module docstring); `error(message, code)` makes the
    exception of bad input (exit 2)."""
    from ..recorders import api

    table = tuple(api.llm_backends)
    max_kl = DEFAULT_MAX_KL if max_kl is None else max_kl
    min_topk_overlap = DEFAULT_MIN_TOPK_OVERLAP if min_topk_overlap is None else min_topk_overlap
    top_k = DEFAULT_TOP_K if top_k is None else top_k
    new_tokens = DEFAULT_NEW_TOKENS if steps is None else steps
    if not (isinstance(max_kl, (int, float)) and math.isfinite(max_kl) and max_kl >= 0):
        raise error(f"max_kl={max_kl!r}: must be a finite number >= 0", "invalid_argument")
    if not (isinstance(min_topk_overlap, (int, float)) and 0 <= min_topk_overlap <= 1):
        raise error(f"min_topk_overlap={min_topk_overlap!r}: must be in [0, 1]",
                    "invalid_argument")
    if not isinstance(new_tokens, int) or isinstance(new_tokens, bool) or new_tokens < 1:
        raise error(f"steps={new_tokens!r}: the new tokens per prompt, an integer >= 1",
                    "invalid_argument")
    if not isinstance(top_k, int) or top_k < 1:
        raise error(f"top_k={top_k!r}: must be an integer >= 1", "invalid_argument")
    ref = reference or REFERENCE_BACKEND
    for what, names in (("--reference", [ref]), ("--backends", list(backends or [])),
                        ("--require", list(require))):
        for n in names:
            if n not in table:
                raise error(f"unknown backend '{n}' ({what}); for a language model choose "
                            f"from: {', '.join(table)}", "invalid_argument")
    chosen = list(backends) if backends else [b for b in table if b != ref]
    order = [n for n in dict.fromkeys(chosen + list(require)) if n != ref]

    model = found.model
    config = model.config
    vocab = getattr(config, "vocab_size", None)
    ctx = _context(config)
    if found.prompts is not None:
        prompts = found.prompts[:samples] if samples else found.prompts
    else:
        if not isinstance(vocab, int) or vocab < 1:
            raise error(f"--model {entry}: the model's config has no vocab_size to draw prompt "
                        f"ids from; return (model, prompt_ids)", "invalid_argument")
        length = PROMPT_TOKENS if ctx is None else max(1, min(PROMPT_TOKENS,
                                                               ctx - new_tokens + 1))
        prompts = [np.random.default_rng(seed + k).integers(0, vocab, length).tolist()
                   for k in range(samples or DEFAULT_PROMPTS)]
    for i, p in enumerate(prompts):
        if ctx is not None and len(p) + new_tokens - 1 > ctx:
            raise error(f"prompt {i + 1} ({len(p)} tokens) and {new_tokens} new tokens need "
                        f"{len(p) + new_tokens - 1} positions; the model's context is {ctx}",
                        "input_mismatch")

    work = os.fspath(out) if out else tempfile.mkdtemp(prefix="driftscope-llm-guard-")
    keep = bool(out)
    total = len(order) + 1
    try:
        if keep:
            os.makedirs(os.path.join(work, ref), exist_ok=True)
        ref_paths = []
        if progress is not None:
            progress(0, total, ref)
        for i, p in enumerate(prompts):
            path = (os.path.join(work, ref, f"prompt{i}.tdump") if keep
                    else os.path.join(work, f"{ref}-prompt{i}.tdump"))
            try:
                # eos=None: every prompt gives new_tokens steps for the candidates to follow
                api.llm_record(model, p, path, new_tokens=new_tokens, backend=ref, eos=None)
            except Error as err:
                raise error(_first_line(err), "input_mismatch") from None
            except Exception as err:  # noqa: BLE001 - the reference failed: nothing to judge
                raise error(f"the reference backend '{ref}' failed: {type(err).__name__}: "
                            f"{_first_line(err)}", "reference_failed") from None
            ref_paths.append(path)
        rows = [BackendResult(name=ref, summary=_summary(ref), note="", status=REFERENCE,
                              reference=True, required=ref in require, runs=1)]
        rows_llm: Dict[str, Dict[str, Any]] = {ref: None}  # type: ignore[dict-item]
        for n, name in enumerate(order, start=1):
            if progress is not None:
                progress(n, total, name)
            row, info = _candidate(name, model, prompts, ref_paths, work, keep,
                                   max_argmax_flip=max_argmax_flip, max_kl=max_kl,
                                   min_topk_overlap=min_topk_overlap, top_k=top_k,
                                   probe=probe)
            row.required = name in require
            rows.append(row)
            rows_llm[name] = info
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return LLMGuardReport(
        llm={"source": found.source, "prompts": prompts,
             "prompts_given": found.prompts is not None, "new_tokens": new_tokens,
             "teacher_forced": True, "top_k": top_k, "max_kl": float(max_kl),
             "min_topk_overlap": float(min_topk_overlap), "backends": list(table)},
        rows_llm=rows_llm, model=entry, family="llm", reference=ref, backends=rows, inputs=[],
        samples=len(prompts), seed=seed, runs=1,
        thresholds=Thresholds(max_argmax_flip=max_argmax_flip), required=list(require),
        reference_nonfinite={}, probe=probe, fallback="never", out=work if keep else None)


def _summary(name: str) -> str:
    return {"hf": "transformers eager, float32", "hf-bf16": "transformers eager, bfloat16",
            "hf-fp16": "transformers eager, float16",
            "hf-compile": "torch.compile, float32"}.get(name, name)


def _candidate(name: str, model: Any, prompts: List[List[int]], ref_paths: List[str], work: str,
               keep: bool, *, max_argmax_flip: float, max_kl: float, min_topk_overlap: float,
               top_k: int, probe: str) -> Any:
    from ..recorders import api

    row = BackendResult(name=name, summary=_summary(name), note="", status=PASS, runs=1)
    if keep:
        os.makedirs(os.path.join(work, name), exist_ok=True)
    reps = []
    intermediates = ""
    for i, p in enumerate(prompts):
        path = (os.path.join(work, name, f"prompt{i}.tdump") if keep
                else os.path.join(work, f"{name}-prompt{i}.tdump"))
        try:
            meta = api.llm_record(model, p, path, backend=name, teacher=ref_paths[i])
            intermediates = meta.get("llm.intermediates", "")
            reps.append((api.llm_compare(ref_paths[i], path, top_k=top_k), path))
        except UnsupportedError as err:
            why = _first_line(err).rstrip(".")
            # the recorder's reason starts with the backend's name; the row already says it
            row.status, row.reason = UNAVAILABLE, why[len(name) + 2:] if why.startswith(
                name + ": ") else why
            return row, None
        except Exception as err:  # noqa: BLE001 - one runtime failing never stops the others
            row.status, row.error = RUNTIME_ERROR, f"{type(err).__name__}: {err}"
            return row, None
    per_prompt = []
    worst_i, worst_key = 0, (-1, -1.0)
    flipped = total = 0
    nonfinite = False
    for i, (rep, path) in enumerate(reps):
        st = rep.steps
        kls = [s["kl"] for s in st]
        bad = any(not math.isfinite(s["kl"]) or not math.isfinite(s["max_abs_diff"]) for s in st)
        nonfinite |= bad
        f = sum(not s["top1_agree"] for s in st)
        flipped += f
        total += len(st)
        mean_overlap = sum(s["topk_overlap"] for s in st) / len(st) if st else 1.0
        status = (NUMERICAL_INSTABILITY if bad else
                  PRECISION_DEGRADATION if (max(kls, default=0.0) > max_kl
                                            or mean_overlap < min_topk_overlap) else
                  ARGMAX_FLIP if f / max(len(st), 1) > max_argmax_flip else PASS)
        pp = {"prompt": i, "steps": len(st), "status": status, "first_flip": rep.first_flip,
              "flipped_steps": f, "max_kl": _num(max(kls, default=0.0)),
              "mean_topk_overlap": mean_overlap,
              "max_abs_diff": _num(max((s["max_abs_diff"] for s in st), default=0.0))}
        per_prompt.append(pp)
        key = (SEVERITY[status], pp["max_kl"] if pp["max_kl"] is not None else math.inf)
        if key > worst_key:
            worst_i, worst_key = i, key
    max_kl_all = max((p["max_kl"] if p["max_kl"] is not None else math.inf
                      for p in per_prompt), default=0.0)
    min_overlap = min((p["mean_topk_overlap"] for p in per_prompt), default=1.0)
    share = flipped / total if total else 0.0
    reasons = []
    statuses = [PASS]
    if nonfinite:
        statuses.append(NUMERICAL_INSTABILITY)
        reasons.append("NaN/Inf in the logits where the reference's are finite")
    if share > max_argmax_flip:
        statuses.append(ARGMAX_FLIP)
    if max_kl_all > max_kl:
        statuses.append(PRECISION_DEGRADATION)
        reasons.append(f"max KL {max_kl_all:.3g} > {max_kl:g}")
    if min_overlap < min_topk_overlap:
        statuses.append(PRECISION_DEGRADATION)
        reasons.append(f"mean top-{top_k} overlap {min_overlap:.3f} < {min_topk_overlap:g}")
    status = max(statuses, key=lambda s: SEVERITY[s])
    rep, path = reps[worst_i]
    flip_text = ""
    first = next(((i, p) for i, p in enumerate(per_prompt) if p["first_flip"] is not None), None)
    if first is not None:
        i, p = first
        s = reps[i][0].steps[p["first_flip"]]
        margin = _margin(ref_paths[i], p["first_flip"])
        flip_text = (f"first token flip at step {p['first_flip']} of prompt {i + 1} "
                     f"({s['ref_token']} -> {s['cand_token']}; the reference's top-2 margin "
                     f"{margin:.3g}), {flipped} of {total} steps flipped")
    detail = "; ".join(x for x in [flip_text] + reasons if x) or (
        f"no token flip in {total} steps, max KL {max_kl_all:.3g}, lowest mean top-{top_k} "
        f"overlap {min_overlap:.3f}")
    stats = _logit_stats(ref_paths[worst_i], path, len(rep.steps))
    row.status = status
    row.worst = OutputResult(name="logits", status=status, sample=worst_i,
                             cosine=stats["cosine"], norm_ref=stats["norm_ref"],
                             norm_cand=stats["norm_cand"], max_diff=stats["max_diff"],
                             rel_error=stats["rel_error"], argmax_flip=share, detail=detail)
    row.outputs = [row.worst]
    probed = probe == "always" or (probe == "auto" and status != PASS)
    # the prompt whose token flipped first, else the worst one
    at = first[0] if first is not None else worst_i
    info = {"steps": total, "flipped_steps": flipped, "flip_share": share,
            "max_kl": _num(max_kl_all), "min_mean_topk_overlap": min_overlap,
            "intermediates": intermediates, "prompts": per_prompt,
            "probe": _probe_json(reps[at][0], at) if probed else None}
    if keep:
        row.notes.append(f"dumps in {os.path.join(work, name)}")
        if probed:  # the probed prompt's growth chart beside its dumps (llm-compare --html's)
            page = os.path.join(work, name, f"prompt{at}.html")
            with open(page, "w", encoding="utf-8") as f:
                f.write(api.llm_heatmap_html(reps[at][0]))
            info["heatmap"] = page
    return row, info


def _num(x: float) -> Optional[float]:
    return float(x) if math.isfinite(x) else None
