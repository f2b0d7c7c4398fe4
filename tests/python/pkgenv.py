"""Where the driftscope package this test process imports lives, for the subprocesses a test
starts (`python -m driftscope ...`): the checkout's python/ folder when the tests run with
PYTHONPATH=python, site-packages after `pip install .` (make test). A test must hand its children
the package it imported itself, never the checkout's python/ folder by path: there the compiled
_core is absent unless someone copied it in."""
from __future__ import annotations

import os
from pathlib import Path


def package_path() -> str:
    import driftscope

    return str(Path(driftscope.__file__).resolve().parents[1])


def env_with_package(env: dict | None = None) -> dict:
    """`env` (default os.environ) with the imported package's folder first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_path(), env.get("PYTHONPATH", ""))
                                        if p)
    return env
