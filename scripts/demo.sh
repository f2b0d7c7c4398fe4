#!/usr/bin/env bash
# make demo: record a tiny transformer encoder in float32 and in float16 (examples/tiny_encoder.cpp),
# let `driftscope compare` find where the float16 run breaks, and explain the answer.
# Exits 0 when compare localises the expected tensor (its own exit code, 3 or 1, is the point of
# the demo, not a failure); non-zero when the build fails or the answer is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/dev}
OUT=${DEMO_OUT:-demo-out}
EXPECTED=encoder.layers.2.norm1

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake --preset "$(basename "$BUILD")" >/dev/null
fi
cmake --build "$BUILD" --target tiny_encoder driftscope_cli >/dev/null

rm -rf "$OUT"
mkdir -p "$OUT"
"$BUILD/examples/tiny_encoder" "$OUT"

echo
echo "\$ driftscope compare $OUT/fp32.tdump $OUT/fp16.tdump --html $OUT/report.html"
rc=0
"$BUILD/driftscope" compare "$OUT/fp32.tdump" "$OUT/fp16.tdump" --json "$OUT/report.json" \
  --html "$OUT/report.html" --plot "$OUT/growth.png" --model-explorer "$OUT/model-explorer.json" || rc=$?

# The localisation must be the known one; the JSON report is the machine-readable answer.
first=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print((d.get("first_divergence") or {}).get("name",""))' "$OUT/report.json")
echo
if [ "$rc" != 1 ] && [ "$rc" != 3 ]; then
  echo "demo: FAILED: compare exited $rc (expected 1 diverged or 3 silent_failure)" >&2
  exit 1
fi
if [ "$first" != "$EXPECTED" ]; then
  echo "demo: FAILED: compare named '$first' as first divergence, expected $EXPECTED" >&2
  exit 1
fi
echo "Why: block 1's MLP writes massive activations (~6000) into 4 hidden channels; float16 holds them (max 65504), but $EXPECTED"
echo "computes its variance in half precision as E[x^2]-E[x]^2: x^2 ~ 3.6e7 and mean^2 ~ 1.4e5 overflow to Inf, Inf-Inf = NaN. Fix: keep LayerNorm statistics in float32:"
echo
"$BUILD/examples/tiny_encoder" --precision fp16-safe "$OUT/fp16-safe.tdump" 2>/dev/null
echo "\$ driftscope compare -q $OUT/fp32.tdump $OUT/fp16-safe.tdump"
"$BUILD/driftscope" compare -q "$OUT/fp32.tdump" "$OUT/fp16-safe.tdump" || {
  echo "demo: FAILED: the fixed float16 run does not pass" >&2
  exit 1
}
echo
echo "Open $OUT/report.html in a browser (one self-contained file, no network): the error growth, every pair,"
echo "and where in each tensor the error sits. $OUT/growth.png is the same growth as a static image."
