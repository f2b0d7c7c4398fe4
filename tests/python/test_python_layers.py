"""scripts/check-python-layers.py (HACKING.md "The Python package"): the package keeps its layers,
and the check does find a circle, a layer break and a private import where there is one."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check-python-layers.py"


def check(package: Path):
    return subprocess.run([sys.executable, str(CHECK), str(package)], capture_output=True,
                          text=True, timeout=60)


def test_the_package_has_no_circle_and_keeps_its_layers():
    out = check(ROOT / "python" / "driftscope")
    assert out.returncode == 0, out.stderr
    assert "no circle, layers kept" in out.stdout


def write(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / "driftscope" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "driftscope"


def test_a_circle_through_a_function_level_import_is_found_and_printed(tmp_path):
    pkg = write(tmp_path, {"__init__.py": "", "_writer.py": "def f():\n    from ._dump import g\n",
                           "_dump.py": "from . import _writer\n"})
    out = check(pkg)
    assert out.returncode == 1
    assert "import circle of 2 modules: driftscope._dump -> driftscope._writer -> driftscope._dump" \
        in out.stderr


def test_a_layer_break_and_private_names_across_layers_are_found(tmp_path):
    pkg = write(tmp_path, {
        "__init__.py": "", "recorders/__init__.py": "", "recorders/api.py": "",
        "recorders/torch.py": "def _call():\n    pass\n",
        "_guard/__init__.py": "", "_guard/_run.py": "def x():\n    from ..recorders.torch import _call\n",
        "recorders/litert.py": "from .._guard import _run\n"})
    out = check(pkg)
    assert out.returncode == 1
    err = out.stderr
    assert "driftscope.recorders.litert (recorders) imports driftscope._guard._run (guard)" in err
    assert "imports the private name(s) _call of driftscope.recorders.torch" in err
    assert "through driftscope.recorders.api only" in err
