"""Functions named on the command line as ``path/to/file.py:FUNCTION`` or ``MODULE:FUNCTION``
(--model of record/guard/replay, --data of guard): one loader, one set of import rules.

The file's own modules import beside it, but after every installed package: a numpy.py in a
downloaded model's folder does not replace numpy (SECURITY.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

from .errors import InvalidArgumentError


def load_function(spec: str, flag: str = "--model") -> Callable[..., Any]:
    """The function `spec` names; InvalidArgumentError (one line naming `flag`) when the text is
    not FILE.py:FUNCTION / MODULE:FUNCTION, the file is missing or has no such function."""
    module_part, sep, func_name = spec.rpartition(":")
    if not sep or not module_part or not func_name:
        raise InvalidArgumentError(
            f"{flag} {spec!r}: expected MODULE:FUNCTION or path/to/file.py:FUNCTION", 1,
            "invalid_argument")
    if module_part.endswith(".py") or os.sep in module_part:
        if not os.path.isfile(module_part):
            raise InvalidArgumentError(f"{flag}: no such file {module_part!r}", 1,
                                       "invalid_argument")
        mod_name = "_driftscope_model_" + os.path.splitext(os.path.basename(module_part))[0]
        folder = os.path.dirname(os.path.abspath(module_part))
        if folder not in sys.path:
            sys.path.append(folder)
        loader_spec = importlib.util.spec_from_file_location(mod_name, module_part)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        loader_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_part)
    try:
        return getattr(module, func_name)
    except AttributeError:
        raise InvalidArgumentError(f"{flag}: {module_part} has no function {func_name!r}", 1,
                                   "invalid_argument") from None
