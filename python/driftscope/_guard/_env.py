"""The environment of the guard's child processes (backends, replay, repro): one place, so every
child imports this very package."""

from __future__ import annotations

import os
from typing import Dict


def child_env() -> Dict[str, str]:
    env = dict(os.environ)
    # The child must import this very package. An installed one it finds by itself; a checkout
    # put on sys.path by hand is passed on (never a site-packages folder: on PYTHONPATH it would
    # come before the standard library).
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.basename(here) not in ("site-packages", "dist-packages"):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env
