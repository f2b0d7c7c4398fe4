#!/usr/bin/env bash
# Installs everything driftscope needs to build, test and demo, from Debian's archive and PyPI only.
# Idempotent and quick when everything is already there (stamp files under build/.deps).
#   scripts/install-deps.sh [cpp|python|all]     (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
stamp_dir=build/.deps
mkdir -p "$stamp_dir"

APT_PACKAGES=(
  ninja-build pkg-config
  libhwy-dev            # portable SIMD with runtime dispatch (numerics kernels)
  libgtest-dev libgmock-dev
  libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libtomlplusplus-dev   # policy and mapping files (compiled header-only into the library)
  libdeflate-dev        # CRC-32 at memory speed (zlib-compatible polynomial)
  libisal-dev           # optional, preferred for CRC-32: 512-bit VPCLMULQDQ folding (~3x libdeflate 1.14)
  zlib1g-dev            # npz export/import (deflate members)
  clang libclang-rt-14-dev   # libFuzzer + sanitizer runtimes
  openjdk-17-jdk-headless    # javac/jar/java for the JDK-only Java library in java/ (built --release 11)
  chromium              # headless browser: tests open the HTML report (tests/python/test_html_report.py)
)

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_cpp() {
  local want; want=$(printf '%s\n' "${APT_PACKAGES[@]}" | sha1sum | cut -c1-12)
  if [ -f "$stamp_dir/apt-$want" ]; then return; fi
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: apt-get install ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    sudo_ apt-get update -qq
    sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  touch "$stamp_dir/apt-$want"
}

install_python() {
  local want; want=$( (cat requirements-dev.txt; python3 --version) | sha1sum | cut -c1-12)
  if [ -f "$stamp_dir/pip-$want" ] && [ -x .venv/bin/python ]; then return; fi
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # torch first, pinned to the CPU build, so nothing later resolves a CUDA build.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -r requirements-dev.txt
  touch "$stamp_dir/pip-$want"
}

case "$what" in
  cpp) install_cpp ;;
  python) install_python ;;
  all) install_cpp; install_python ;;
  *) echo "usage: $0 [cpp|python|all]" >&2; exit 2 ;;
esac
