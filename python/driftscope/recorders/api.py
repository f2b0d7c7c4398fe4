"""What the recorders lend the rest of the package: the guard and the references use these names,
never a recorder module's private ones (scripts/check-python-layers.py checks it), so a recorder
can change inside as long as this table holds.

A name is looked up when it is imported (PEP 562), and only then is its recorder, and with it
its framework, imported: ``from driftscope.recorders.api import onnx_load_model`` inside a
function costs nothing until that function runs, as the direct import it replaces did. The
value is the recorder's own attribute at that moment (a test that monkeypatches the recorder
is seen).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

# name -> (recorder module, its attribute): what each one does is documented where it is defined.
LENT: Dict[str, Tuple[str, str]] = {
    # driftscope.onnxruntime: reading a model and its graph, running a session, recording
    "onnx_load_model": ("onnxruntime", "_load_model"),            # (bytes, external dir, name)
    "onnx_topological_nodes": ("onnxruntime", "_topological_nodes"),
    "onnx_static_values": ("onnxruntime", "_static_values"),      # constant-folded value names
    "onnx_all_graphs": ("onnxruntime", "_all_graphs"),            # the graph and its subgraphs
    "onnx_external_data_files": ("onnxruntime", "external_data_files"),
    "onnx_to_float16": ("onnxruntime", "_to_float16"),
    "onnx_float16_marker": ("onnxruntime", "_INSERTED"),          # doc string of inserted casts
    "onnx_make_session": ("onnxruntime", "_make_session"),
    "onnx_check_inputs": ("onnxruntime", "_check_inputs"),
    "onnx_run": ("onnxruntime", "_run"),
    "onnx_record": ("onnxruntime", "record"),
    "onnx_observer_effect": ("onnxruntime", "_observer_effect"),
    "onnx_observer_effect_relative": ("onnxruntime", "observer_effect_relative"),
    "onnx_load_cli_inputs": ("onnxruntime", "load_cli_inputs"),
    "onnx_plan_names": ("onnxruntime", "_plan"),                  # the names a dump gives values
    # driftscope.litert: feeding and invoking an interpreter (litert_open below loads one)
    "litert_feed": ("litert", "_feed"),
    "litert_invoke": ("litert", "_invoke"),
    "litert_record": ("litert", "record"),
    # driftscope.torch: a model from MODULE:FUNCTION, calling it, its outputs flattened
    "torch_load_entry_point": ("torch", "_load_entry_point"),
    "torch_convert_inputs": ("torch", "_convert_inputs"),
    "torch_call": ("torch", "_call"),
    "torch_flat": ("torch", "_flat"),
    "torch_record": ("torch", "record"),
    # driftscope.llm: generations of a causal LM (the guard of a language model, _guard/_llm.py)
    "llm_backends": ("llm", "BACKENDS"),                          # the backend table
    "llm_record": ("llm", "record"),
    "llm_compare": ("llm", "compare"),
    "llm_heatmap_html": ("llm_heatmap", "to_html"),               # llm-compare --html's page
    # driftscope.recorders.naming: the scope of a recorded name (the module path it is under)
    "split_scope": ("naming", "split_scope"),
}

__all__ = sorted(LENT) + ["litert_open"]


def litert_open(model: Any, kernels: str = "reference") -> Tuple[Any, str]:
    """A .tflite model (a path or its bytes) read, its flatbuffer checked (a hostile file is a
    one-line ModelLoadError, never a crash in the runtime) and loaded: (interpreter, name). The
    interpreter keeps no intermediate tensors (the recorder's own loading keeps them)."""
    from . import litert

    data, name = litert._read_model(model)
    litert._check_flatbuffer(data, name)
    return litert._interpreter(data, name, kernels, None, preserve=False), name


def __getattr__(name: str) -> Any:
    try:
        module, attr = LENT[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


def __dir__() -> list:
    return sorted(set(globals()) | set(LENT))
