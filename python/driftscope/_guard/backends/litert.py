"""The LiteRT backends (litert, litert-ref, litert-gpu): the .tflite model on the interpreter's
default kernels (builtin + XNNPACK, what an app gets) or its reference kernels.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from .base import Backend, Session, _gpu_device, _missing


class _LiteRTSession(Session):
    def __init__(self, it: Any, name: str, model: Any = None, kernels: str = "optimized"
                 ) -> None:
        self.it, self.name, self.notes = it, name, []
        self.model, self.kernels = model, kernels

    def _feeds(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        feeds = dict(feeds)
        for d in self.it.get_input_details():
            # A float value for a quantized input (--reference-model: the inputs follow the
            # float reference): quantized with the input's own scale and zero point.
            v = feeds.get(d["name"])
            scale, zero = d.get("quantization", (0.0, 0))
            if v is not None and scale and np.dtype(d["dtype"]).kind in "iu" and \
                    np.asarray(v).dtype.kind == "f":
                info = np.iinfo(d["dtype"])
                feeds[d["name"]] = np.clip(np.round(np.asarray(v, np.float64) / scale) + zero,
                                           info.min, info.max).astype(d["dtype"])
        return feeds

    def _outputs(self, values: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        for d in self.it.get_output_details():
            if d["name"] not in values:
                continue
            v = np.array(values[d["name"]])
            scale, zero = d.get("quantization", (0.0, 0))
            if scale and v.dtype.kind in "iu":  # judge what the integers stand for
                v = float(scale) * (v.astype(np.float64) - int(zero))
            out[d["name"]] = v
        return out

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        from ...recorders.api import litert_feed as _feed, litert_invoke as _invoke

        _feed(self.it, self._feeds(feeds), self.name)
        _invoke(self.it, self.name)
        return self._outputs({d["name"]: self.it.get_tensor(d["index"])
                              for d in self.it.get_output_details()})

    def record(self, feeds: Mapping[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
        """driftscope.litert's recorder, on the same kernels: every op output in model order
        under its tensor name (the same names on litert-ref and litert, so the probe compares
        them name by name); quantized tensors keep their encoding."""
        if self.model is None:
            raise NotImplementedError
        import warnings

        from ...recorders.api import litert_record as record

        with warnings.catch_warnings():  # tensors LiteRT cannot hand out: left out, not fatal
            warnings.simplefilter("ignore", RuntimeWarning)
            rec = record(self.model, self._feeds(feeds), path, kernels=self.kernels,
                         check_observer=False)
        return self._outputs(rec.outputs)


class LiteRTBackend(Backend):
    family = "tflite"

    def __init__(self, name: str, summary: str, kernels: str) -> None:
        self.name, self.summary, self.kernels = name, summary, kernels

    def unavailable(self) -> Optional[str]:
        return _missing("ai_edge_litert", "ai-edge-litert")

    def load(self, model: str, work: str, seed: int) -> Session:
        from ...recorders.api import litert_open

        it, name = litert_open(model, self.kernels)
        return _LiteRTSession(it, name, model, self.kernels)


class LiteRTGpuBackend(Backend):
    name = "litert-gpu"
    family = "tflite"
    summary = "LiteRT GPU accelerator"

    def unavailable(self) -> Optional[str]:
        if _gpu_device() is None:
            return "this machine has no GPU device (no /dev/dri render node, no /dev/nvidia*)"
        return "the LiteRT GPU runner is not implemented in this version of driftscope guard"


# In --list-backends order (registry.py registers them).
BUILT_IN = (
    LiteRTBackend("litert", "LiteRT interpreter, default kernels (builtin + XNNPACK delegate, "
                  "what an app gets)", "optimized"),
    LiteRTBackend("litert-ref", "LiteRT interpreter, reference kernels (BuiltinRefOpResolver)",
                  "reference"),
    LiteRTGpuBackend(),
)
