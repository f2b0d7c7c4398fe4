"""``driftscope.torch``: the public path of the torch recorder, whose code is in
``driftscope.recorders.torch``. This module *is* that one (one module object under both names),
so its names, private ones included, and a test's monkeypatching are the same under either.
"""
import sys

from .recorders import torch as _recorder

sys.modules[__name__] = _recorder
