"""``driftscope.onnxruntime``: the public path of the onnxruntime recorder, whose code is in
``driftscope.recorders.onnxruntime``. This module *is* that one (one module object under both names),
so its names, private ones included, and a test's monkeypatching are the same under either.
"""
import sys

from .recorders import onnxruntime as _recorder

if __name__ == "__main__":  # `python -m driftscope.onnxruntime`, as before the move
    sys.exit(_recorder.cli_main())
sys.modules[__name__] = _recorder
