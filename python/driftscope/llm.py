"""``driftscope.llm``: the public path of the language-model generation recorder and comparer,
whose code is in ``driftscope.recorders.llm`` (docs/howto/llm.md). This module *is* that one (one
module object under both names), as ``driftscope.torch`` is.
"""
import sys

from .recorders import llm as _recorder

sys.modules[__name__] = _recorder
