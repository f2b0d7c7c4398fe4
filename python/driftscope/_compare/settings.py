"""compare()'s keyword arguments as the engine's CompareSettings, by the library's table of compare
options (include/driftscope/compare_options.hpp, ``_core.compare_options()``): shared by the local
engine (api.compare), the Ray one (ray.py) and the command (cli.py), which import nothing else of
api.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Union

from .. import _core

_ROWS: List[Dict[str, Any]] = _core.compare_options()


def rows(scope: str = "") -> List[Dict[str, Any]]:
    """The table's rows (every one, or those of scope "settings" / "command")."""
    return [r for r in _ROWS if not scope or r["scope"] == scope]


def _value(row: Mapping[str, Any], v: Any) -> Any:
    """A keyword's Python value as the field of its row takes it."""
    t = row["type"]
    if t == "flag":
        return bool(v)
    if t == "text":
        return "" if v is None else (os.fspath(v) if row["role"] != "value" else v)
    if t == "list":
        if row["name"] == "r64_k" and isinstance(v, Mapping):  # {"f16": 3} is ["f16=3"]
            return [f"{n}={k!r}" for n, k in v.items()]
        return list(v)
    if t == "names":
        return [(str(a), str(b)) for a, b in (v or {}).items()]
    return v


def settings(o: Mapping[str, Any]) -> Any:
    """The engine's CompareSettings from every keyword argument of compare() (api.options fills
    the ones not given; unchecked: the engine's one validator checks them when it runs)."""
    s = _core.CompareSettings()
    for row in rows("settings"):
        if row["keyword"] == "policy":
            s.policy_text, s.policy = _policy(o["policy"])
        elif row["keyword"]:
            setattr(s, row["name"], _value(row, o[row["keyword"]]))
    return s


def copy(s: Any, **changes: Any) -> Any:
    """A copy of CompareSettings `s` with `changes` (by field name), through its JSON."""
    t, _ = _core.compare_options_from_json(_core.compare_options_to_json(s))
    for k, v in changes.items():
        setattr(t, k, v)
    return t


def _policy(policy: Union[None, str, "os.PathLike[str]", Mapping[str, Any]]):
    """(text, path) for the engine: a mapping becomes JSON text, anything else is a file."""
    if policy is None:
        return "", ""
    if isinstance(policy, Mapping):
        return json.dumps(policy), ""
    return "", os.fspath(policy)
