#!/usr/bin/env bash
# A second virtual environment for the guard's LiteRT rows of a PyTorch model (tflite-litert*,
# docs/howto/guard.md §6), layered on the project's .venv: litert-torch cannot join .venv itself,
# because its xdsl pins typing-extensions<4.13 while coremltools' cattrs (through executorch)
# needs >=4.14, and pip refuses to resolve both in one environment. Here the project's packages
# are seen through a .pth file, and litert-torch with its own typing-extensions/pydantic goes into
# this venv only (pip never touches .venv's). torch stays the project's CPU build (litert-torch
# does not ask for another). Prints the venv's python on success.
set -euo pipefail
cd "$(dirname "$0")/.."
V=build/litert-torch-venv
PIN=litert-torch==0.10.0
if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c "import litert_torch" 2>/dev/null; then
  .venv/bin/python -m venv "$V" >&2
  site=$("$V/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  main=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$main" > "$site/driftscope-project-venv.pth"
  "$V/bin/python" -m pip install -q "$PIN" >&2
  "$V/bin/python" -c "import litert_torch, torch; assert torch.__version__.startswith('2.13')" >&2
fi
echo "$PWD/$V/bin/python"
