#!/usr/bin/env bash
# Runs the reader's libFuzzer target for a bounded time (default 60 s), seeded with the golden
# vectors. Crashes are saved under build/fuzz-artifacts/.  Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake --preset asan >/dev/null
cmake --build build/asan -j "${JOBS:-$(nproc)}" --target fuzz_tdump_reader
corpus=build/fuzz-corpus
mkdir -p "$corpus" build/fuzz-artifacts
cp -n tests/vectors/*.tdump tests/vectors/*/*.tdump "$corpus"/ 2>/dev/null || true
build/asan/tests/fuzz/fuzz_tdump_reader "$corpus" -max_total_time="$seconds" -max_len=65536 \
  -timeout=10 -rss_limit_mb=2048 -artifact_prefix=build/fuzz-artifacts/ -print_final_stats=1 2>&1 | tail -n 12
