#!/usr/bin/env bash
# Every report driftscope renders, over every fixture and example dump pair, written into one
# folder, so that a refactoring of the renderers can be shown to keep the bytes (issue 25 §1):
#
#   scripts/report-bytes.sh /tmp/report-before          # on the old code
#   scripts/report-bytes.sh /tmp/report-after           # on the new code
#   diff -r /tmp/report-before /tmp/report-after        # must print nothing
#
# Runs `driftscope compare` (text, --all, --json, --markdown, --html, --plot, --model-explorer)
# and `driftscope check` (text, --json, --html) on the dumps of the CLI tests
# (tests/cli/compare/fixtures.py, tests/python/test_cli.py's fixtures), the golden vectors
# (tests/vectors: valid ones paired, every one checked) and the demo (examples/tiny_encoder), and
# the guard page (guard_report_to_html) of tests/tools/guard_pages/*.json through
# build/*/tests/tools/guard_page_tool when that tool exists. Each output file is named after its
# case; stdout, stderr and the exit code are kept too. The dumps themselves go to OUT/dumps (they
# are deterministic, so they are compared as well).
# BUILD=build/dev by default; PYTHON=the interpreter with numpy (/work/main/.venv or .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:?usage: scripts/report-bytes.sh OUT_DIR}
BUILD=${BUILD:-build/dev}
BIN=$ROOT/$BUILD/driftscope
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
[ -x "$BIN" ] || { echo "report-bytes: $BIN not built" >&2; exit 2; }
[ -e "$OUT" ] && { echo "report-bytes: $OUT exists; give a new folder" >&2; exit 2; }
mkdir -p "$OUT/dumps" "$OUT/compare" "$OUT/check" "$OUT/guard"
OUT=$(cd "$OUT" && pwd)
D=$OUT/dumps
export COLUMNS=100 NO_COLOR=1 LC_ALL=C

# ---- the dumps ---------------------------------------------------------------------------------
"$PYTHON" tests/cli/compare/fixtures.py "$D" >/dev/null
DRIFTSCOPE_BIN=$BIN "$PYTHON" - "$D" <<'EOF'
# The fixture folder of tests/python/test_cli.py (run.tdump, multi.tdump, cut/corrupt/... copies).
import sys, pathlib
sys.path.insert(0, "tests/python")
import test_cli
class Factory:
    def mktemp(self, name):
        p = pathlib.Path(sys.argv[1]) / "cli"
        p.mkdir()
        return p
f = test_cli.fixtures
for attr in ("_get_wrapped_function", "__wrapped__"):
    if hasattr(f, attr):
        f = getattr(f, attr)() if attr.startswith("_get") else getattr(f, attr)
        break
f(Factory())
EOF
cp tests/vectors/valid/*.tdump "$D/"
mkdir -p "$D/vectors"
for kind in valid damaged invalid rejected; do
  for f in tests/vectors/$kind/*.tdump; do cp "$f" "$D/vectors/$kind-$(basename "$f")"; done
done
if [ -x "$BUILD/examples/tiny_encoder" ]; then
  "$BUILD/examples/tiny_encoder" "$D" >/dev/null
  "$BUILD/examples/tiny_encoder" --precision fp16-safe "$D/fp16-safe.tdump" >/dev/null 2>&1
fi

# ---- compare -----------------------------------------------------------------------------------
# compare NAME REF CAND [OPTIONS...]: every rendering of one comparison, run in the dumps folder.
compare() {
  local name=$1 ref=$2 cand=$3; shift 3
  local o=$OUT/compare/$name rc=0
  (cd "$D" && "$BIN" compare "$ref" "$cand" "$@" --no-progress --json "$o.json" --markdown "$o.md" \
     --html "$o.html" --plot "$o.png" --model-explorer "$o.me.json" >"$o.txt" 2>"$o.err") || rc=$?
  echo "$rc" >"$o.exit"
  rc=0
  (cd "$D" && "$BIN" compare "$ref" "$cand" "$@" --no-progress --all >"$o.all.txt" 2>"$o.all.err") || rc=$?
  echo "$rc" >"$o.all.exit"
}
for c in same scaled zeroed nan partial renamed half; do compare "fx-$c" ref.tdump $c.tdump; done
compare fx-scaled-stop ref.tdump scaled.tdump --stop-at-first
compare fx-partial-allowed ref.tdump partial.tdump --allow-unpaired
compare fx-renamed-mapped ref.tdump renamed.tdump --map-b '^/(\w+)/(\d+)/output_0$=>$1.$2'
compare fx-positional ref.tdump renamed.tdump --pairs positional
compare fx-cosine ref.tdump scaled.tdump --min-cosine 0.5
compare fx-half-r64 ref.tdump half.tdump --reference64 ref64.tdump
compare fx-logits logits_a.tdump logits_b.tdump --top-k 2
compare fx-logits-argmax logits_a.tdump logits_b.tdump --min-argmax 0.9
compare fx-nan-equal ref.tdump nan.tdump --nan-equal
compare cli-run-run cli/run.tdump cli/run.tdump
compare cli-run-multi cli/run.tdump cli/multi.tdump --allow-unpaired --allow-incomparable
compare cli-multi-multi cli/multi.tdump cli/multi.tdump
compare cli-multi-unfinished cli/multi.tdump cli/unfinished.tdump
compare cli-run-cut cli/run.tdump cli/cut.tdump
compare cli-run-corrupt cli/run.tdump cli/corrupt.tdump
for f in tests/vectors/valid/*.tdump; do
  b=$(basename "$f" .tdump)
  compare "vec-$b" "$b.tdump" "$b.tdump"
done
compare vec-quantized-edge quantized.tdump quantized_edge.tdump --allow-unpaired --allow-incomparable
compare vec-summary-checked summary.tdump summary_checked.tdump --allow-unpaired --allow-incomparable
compare vec-appended-example example.tdump appended.tdump --allow-unpaired --allow-incomparable
if [ -f "$D/fp32.tdump" ]; then
  compare demo-fp16 fp32.tdump fp16.tdump
  compare demo-fp16-safe fp32.tdump fp16-safe.tdump
  compare demo-fp16-all fp32.tdump fp16.tdump --allow-unpaired --min-sqnr 30
fi

# ---- check -------------------------------------------------------------------------------------
for f in $(cd "$D" && ls *.tdump cli/*.tdump vectors/*.tdump); do
  n=$(echo "$f" | tr / -)
  o=$OUT/check/${n%.tdump}
  rc=0
  (cd "$D" && "$BIN" check "$f" --json "$o.json" --html "$o.html" >"$o.txt" 2>"$o.err") || rc=$?
  echo "$rc" >"$o.exit"
done

# ---- the guard page --------------------------------------------------------------------------
tool=$BUILD/tests/tools/guard_page_tool
if [ -x "$tool" ]; then
  for f in tests/tools/guard_pages/*.json; do
    rc=0
    "$tool" "$f" >"$OUT/guard/$(basename "$f" .json).html" 2>"$OUT/guard/$(basename "$f" .json).err" || rc=$?
    echo "$rc" >"$OUT/guard/$(basename "$f" .json).exit"
  done
fi
echo "report-bytes: $(find "$OUT" -type f | wc -l) files in $OUT"
