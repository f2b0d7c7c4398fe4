"""Functions named on the command line as ``path/to/file.py:FUNCTION`` or ``MODULE:FUNCTION``
(--model of record/guard/replay, --data of guard): one loader, one set of import rules.

The file's own modules import beside it, but after every installed package: a numpy.py in a
downloaded model's folder does not replace numpy (SECURITY.md).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

from .errors import InvalidArgumentError


def _escapes(err: BaseException) -> bool:
    """Whether user code raised something the commands' `except Exception` would let through
    and end driftscope with: sys.exit() (whose code would become driftscope's, 0 included, with
    no output written) or another BaseException. ^C, driftscope's own SIGTERM exception and a
    generator's close stay what they are."""
    if isinstance(err, (Exception, KeyboardInterrupt, GeneratorExit)):
        return False
    return not type(err).__module__.startswith("driftscope")


def _guarded(flag: str, spec: str, when: str, fn: Callable[..., Any], *args: Any,
             **kwargs: Any) -> Any:
    """fn(*args, **kwargs), user code: what _escapes lets through becomes an InvalidArgumentError
    ('--model m.py:f: the function called sys.exit(0)'), which every command reports in one
    line, exit 2, as it reports an exception of the function."""
    try:
        return fn(*args, **kwargs)
    except BaseException as err:
        if not _escapes(err):
            raise
        what = (f"called sys.exit({err.code!r})" if isinstance(err, SystemExit)
                else f"raised {type(err).__name__}: {err}")
        raise InvalidArgumentError(f"{flag} {spec}: {when} {what}", 1,
                                   "invalid_argument") from None


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
        _guarded(flag, spec, "importing its module", loader_spec.loader.exec_module, module)
    else:
        module = _guarded(flag, spec, "importing its module", importlib.import_module, module_part)
    try:
        fn = getattr(module, func_name)
    except AttributeError:
        raise InvalidArgumentError(f"{flag}: {module_part} has no function {func_name!r}", 1,
                                   "invalid_argument") from None
    if not callable(fn):
        raise InvalidArgumentError(f"{flag}: {module_part}.{func_name} is a "
                                   f"{type(fn).__name__}, not a function", 1, "invalid_argument")

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return _guarded(flag, spec, "the function", fn, *args, **kwargs)

    return call
