#!/usr/bin/env bash
# A separate virtual environment with NVIDIA ModelOpt's ONNX AutoCast, for the side-by-side fallback
# benchmark (bench/bench_fp16_fallback.py). Separate because modelopt is not a project dependency and
# must not pull a CUDA build of torch into the project's venv: torch is installed first at the CPU build
# already on disk, then modelopt with --no-deps and the pure-Python packages its onnx part imports.
# Prints the venv's python on success.
set -euo pipefail
cd "$(dirname "$0")/.."
V=build/bench-autocast-venv
if [ ! -x "$V/bin/python" ] || ! "$V/bin/python" -c "import modelopt.onnx.autocast" 2>/dev/null; then
  python3 -m venv "$V" >&2
  "$V/bin/pip" install -q torch==2.13.0 >&2
  "$V/bin/pip" install -q numpy onnx onnxruntime onnx-graphsurgeon onnxslim onnxscript lief tqdm pynvml \
    scipy safetensors "setuptools>=80" >&2
  "$V/bin/pip" install -q --no-deps nvidia-modelopt==0.47.0 >&2
  "$V/bin/python" -c "import modelopt.onnx.autocast" >&2
fi
echo "$PWD/$V/bin/python"
