#!/usr/bin/env bash
# Builds and runs every test suite (what `make test` and CI run):
#   1. C++ unit tests, C ABI test, example tests          (dev preset, gcc, ctest; also the
#      Java library's tests, java/build.sh, registered as ctest java.tdump, and the layer rule
#      of HACKING.md over the includes, scripts/check-layers.sh, ctest layers.includes; and the
#      packaging checks, ctest -L packaging: the installed package through find_package, and the
#      library compiled once more as shared libraries whose exports scripts/check-exports.sh
#      checks, ctest install.shared_library, about 2 CPU-minutes)
#   2. the Python package's import layers (scripts/check-python-layers.py), the package built from
#      this tree + pytest                                 (CLI, vectors, metrics vs numpy, recorders;
#      the wheel links the dev build's library), then the CPU-dependent guard tests once more
#      with DRIFTSCOPE_HIDE_CPU=all (as on a CPU without native float16/bfloat16/AMX)
#   3. the C++ unit suite and the CLI tests under ASan+UBSan (asan preset, clang)
#   4. a short libFuzzer smoke run of every fuzz target   (asan preset, one per parser)
# Stages can be picked: scripts/run-tests.sh cpp python asan fuzz   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
stages=${*:-cpp python asan fuzz}
failed=()
# Each banner shows the seconds since the start, so a CI log tells where the time went.
banner() { printf '\n==== %s  [+%ds] ====\n' "$*" "$SECONDS"; }
has() { [[ " $stages " == *" $1 "* ]]; }

if has cpp || has python; then
  banner "build (dev)"
  cmake --preset dev >/dev/null
  cmake --build build/dev -j "$JOBS"
fi

if has cpp; then
  banner "C++ unit, C ABI, example and Java tests"
  # The Java tests are registered only when a JDK is found: without one they would vanish silently.
  command -v javac >/dev/null || { echo "run-tests: javac not found (scripts/install-deps.sh installs openjdk-17-jdk-headless)" >&2; failed+=(java); }
  ctest --test-dir build/dev --output-on-failure -j "$JOBS" || failed+=(cpp)
fi

if has python; then
  banner "Python package and tests"
  # The litert-torch venv (a pip install into its own folder, mostly waiting on the network and
  # the disk) is made while the package is installed and the main run goes on, not after it.
  mkdir -p build
  scripts/litert-torch-venv.sh >build/litert-torch-venv.out 2>build/litert-torch-venv.log &
  lt_venv=$!
  # The package's import circles and layer rules (HACKING.md), from the source: under a second.
  python3 scripts/check-python-layers.py || failed+=(python-layers)
  if [ -f pyproject.toml ]; then
    # `pip install .` as a user runs it (scikit-build-core, the wheel's install rules, its
    # command), except that the wheel links the library build/dev has just compiled instead of
    # compiling it again in Release (DRIFTSCOPE_LIBRARY_FROM, CMakeLists.txt; CI: 303 -> 86 CPU
    # seconds). Its own build folder keeps that setting out of a plain install's build/python.
    .venv/bin/python -m pip install -q --no-build-isolation --no-deps \
      -C cmake.define.DRIFTSCOPE_LIBRARY_FROM="$PWD/build/dev" -C "build-dir=build/python-ci/{wheel_tag}" \
      . || failed+=(python-install)
  fi
  # pytest-xdist: one worker per core (PYTEST_WORKERS=0 runs in this process). Module- and
  # session-scoped fixtures run once per worker; --dist loadfile keeps a file's tests on one
  # worker, so a file's expensive fixture (a real model recorded once) is not built twice.
  # --durations: the CI log names the slowest tests, where the next minutes of CI time are.
  DRIFTSCOPE_NO_SKIPS=1 DRIFTSCOPE_BIN="$PWD/build/dev/driftscope" .venv/bin/python -m pytest -q -rs \
    -n "${PYTEST_WORKERS:-$JOBS}" --dist loadfile --durations=25 -m "not litert_torch" tests/python \
    || failed+=(python)
  # The tests that need litert-torch, in its own venv layered on .venv (scripts/litert-torch-venv.sh
  # says why it cannot join .venv). Only the files that mark tests litert_torch are collected
  # (collecting all of tests/python costs each worker ~11 CPU-seconds), and --dist load spreads
  # their few long tests over both workers (--dist loadfile left one worker idle: one file).
  banner "PyTorch models on LiteRT (litert-torch venv)"
  lt_files=$(grep -l 'mark\.litert_torch' tests/python/test_*.py || true)
  if wait "$lt_venv" && LT=$(cat build/litert-torch-venv.out) && [ -x "$LT" ] && [ -n "$lt_files" ]; then
    # shellcheck disable=SC2086 # one word per file
    DRIFTSCOPE_NO_SKIPS=1 DRIFTSCOPE_BIN="$PWD/build/dev/driftscope" "$LT" -m pytest -q -rs \
      -n "${PYTEST_WORKERS:-$JOBS}" --dist load -m litert_torch $lt_files \
      || failed+=(python-litert-torch)
  else
    cat build/litert-torch-venv.log >&2
    [ -n "$lt_files" ] || echo "run-tests: no test file marks a test litert_torch" >&2
    failed+=(litert-torch-venv)
  fi
  # The guard tests whose results depend on the CPU, again as on a CPU without native float16,
  # bfloat16 or AMX (docs/howto/guard.md §3): whichever CPU runs CI, both paths are exercised.
  # One file of a few long tests, no fixture shared between them: --dist load (see above).
  # Only the OpenVINO backends read $DRIFTSCOPE_HIDE_CPU (_guard/_cpu.py); the file's three tests
  # that run none (executorch, litert, exit-2 paths on ort: ~25 CPU-seconds) ran in the main run
  # above and would run identically here, so they are left out.
  banner "guard tests with DRIFTSCOPE_HIDE_CPU=all"
  DRIFTSCOPE_HIDE_CPU=all DRIFTSCOPE_NO_SKIPS=1 DRIFTSCOPE_BIN="$PWD/build/dev/driftscope" \
    .venv/bin/python -m pytest -q -rs -n "${PYTEST_WORKERS:-$JOBS}" --dist load \
    -k "not executorch_binds and not real_tflite_model and not bad_state_scalar" \
    tests/python/test_guard_backends.py || failed+=(python-hide-cpu)
fi

if has asan; then
  banner "C++ unit suite and CLI tests under ASan+UBSan"
  cmake --preset asan >/dev/null
  cmake --build build/asan -j "$JOBS"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build/asan --output-on-failure -j "$JOBS" -L unit || failed+=(asan)
  # The same CLI cases as stage 2, run by the sanitized binary: a report fails the case (its
  # stderr no longer matches), so every hostile-file case is also a memory-safety check.
  DRIFTSCOPE_NO_SKIPS=1 DRIFTSCOPE_BIN="$PWD/build/asan/driftscope" .venv/bin/python -m pytest -q \
    -n "${PYTEST_WORKERS:-$JOBS}" tests/python/test_cli.py tests/python/test_cli_compare.py || failed+=(asan-cli)
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if has fuzz; then
  banner "libFuzzer smoke run (every target)"
  scripts/fuzz.sh "${FUZZ_SMOKE_SECONDS:-6}" || failed+=(fuzz)
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "run-tests: FAILED stages: ${failed[*]}" >&2
  exit 1
fi
echo "run-tests: all stages passed ($stages) in ${SECONDS}s"
