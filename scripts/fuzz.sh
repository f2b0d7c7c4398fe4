#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/, one per parser, named fuzz_<entry point>) for a bounded
# time each, seeded with its committed corpus (tests/fuzz/corpus/<target>/) and, for the TDUMP
# reader, the golden vectors. Crashes are saved under build/fuzz-artifacts/<target>/ and fail the run.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
cmake --preset asan >/dev/null
# Every fuzz_* target the asan build defines (the list lives in tests/fuzz/CMakeLists.txt only).
mapfile -t all < <(cmake --build build/asan --target help | sed -n 's/^\(fuzz_[a-z0-9_]*\):.*/\1/p' | sort -u)
targets=("${@:-${all[@]}}")
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no fuzz_* targets defined" >&2; exit 2; }
cmake --build build/asan -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
# Each target is one single-threaded process for a fixed time: JOBS of them run side by side
# (a 2-core CI runner: 7 targets x 6 s took 42 s one after another), each into its own log,
# reported in target order once all have finished.
jobs_max=${JOBS:-$(nproc)}
fuzz_one() {
  local t=$1 corpus=build/fuzz-corpus/$1 artifacts=build/fuzz-artifacts/$1
  mkdir -p "$corpus" "$artifacts"
  [ -d "tests/fuzz/corpus/$t" ] && cp -rn "tests/fuzz/corpus/$t"/. "$corpus"/ 2>/dev/null || true
  if [ "$t" = fuzz_tdump_reader ]; then
    cp -n tests/vectors/*/*.tdump "$corpus"/ 2>/dev/null || true
  fi
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: unbounded allocation is a bug.
  build/asan/tests/fuzz/"$t" "$corpus" -max_total_time="$seconds" -max_len=65536 \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" -print_final_stats=1 \
    >"build/fuzz-$t.log" 2>&1
}
declare -A pid_of
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$t" & pid_of[$t]=$!
done
failed=()
for t in "${targets[@]}"; do
  printf '\n---- %s (%ss) ----\n' "$t" "$seconds"
  if ! wait "${pid_of[$t]}"; then
    failed+=("$t")
    tail -n 40 "build/fuzz-$t.log"
  else
    grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "build/fuzz-$t.log" || tail -n 3 "build/fuzz-$t.log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED targets: ${failed[*]} (inputs in build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a finding"
