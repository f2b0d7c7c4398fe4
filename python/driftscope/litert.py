"""``driftscope.litert``: the public path of the litert recorder, whose code is in
``driftscope.recorders.litert``. This module *is* that one (one module object under both names),
so its names, private ones included, and a test's monkeypatching are the same under either.
"""
import sys

from .recorders import litert as _recorder

if __name__ == "__main__":  # `python -m driftscope.litert`, as before the move
    sys.exit(_recorder.cli_main())
sys.modules[__name__] = _recorder
