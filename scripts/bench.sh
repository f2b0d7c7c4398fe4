#!/usr/bin/env bash
# Runs every benchmark and prints the ratios each one measures side by side (make bench).
# Expects the release preset to be built (the Makefile's bench target does that first).
set -uo pipefail
cd "$(dirname "$0")/.."
B=build/release
run() { printf '\n==== %s ====\n' "$1"; shift; "$@" || echo "(benchmark failed: $?)"; }
run "format: writer vs plain write(), reader scan+verify" $B/bench/ds_bench_format 512 1024
run "format: small tensors (16 KiB)" $B/bench/ds_bench_format 64 16
run "footer index: write, verify, open+lookup at 200k and 800k records, ordinary and FNV-1a-colliding names (4x linear)" \
  $B/bench/ds_bench_index 200000 /tmp
run "import/export: time per key, 10k..80k tensors" $B/bench/ds_bench_interop /tmp 80000
run "metric kernels (f32, f16, bf16) against the plain read in C of the same bytes, same threads (targets 70%, 60%)" \
  $B/bench/ds_bench_kernels
run "compare: cached f32 dumps against a plain mmap read, same threads (target >= 35%); --html details vs plain, 2 threads and 1 (target <= 1.3x)" \
  $B/bench/ds_bench_compare_throughput --mb 512
run "compare: start-up, two tiny dumps against --version and /bin/true (target <= 10 ms)" \
  $B/bench/ds_bench_compare_throughput --startup $B/driftscope
run "compare: peak RSS and time against the record count (plain, --json; target 1M: <= 1 GB, 5 s)" \
  $B/bench/ds_bench_compare_memory --records 10000,100000,1000000 $B/driftscope
run "compare: the same with the data flow the PyTorch recorder writes (ds.inputs, ds.source)" \
  $B/bench/ds_bench_compare_memory --records 100000,1000000 --dataflow $B/driftscope
run "compare: origins on the data flow, 40k..160k independent origins and a hub fanned out to 250..1000 (ratios ~4x time, ~1x RSS)" \
  $B/bench/ds_bench_dataflow --origins 40000 --hub 250 $B/driftscope
run "compare: peak RSS of one pair of single large tensors (bounded by the working chunk)" \
  $B/bench/ds_bench_compare_memory --records 1000 --big-mib 1024 $B/driftscope
run "growth at N and 4N (linear ~4, quadratic ~16): --model-explorer, dump-set manifests, check" \
  $B/bench/ds_bench_scaling --dir /tmp
[ -f bench/compare_vs_numpy.py ] && run "compare vs numpy float64" \
  env DRIFTSCOPE_BIN=$B/driftscope .venv/bin/python bench/compare_vs_numpy.py
[ -f bench/bench_record_overhead.py ] && run "PyTorch recording overhead (all-MiniLM-L6-v2)" \
  .venv/bin/python bench/bench_record_overhead.py
[ -f bench/bench_llm_record.py ] && run "LLM generation recording overhead per token (tiny Llama) vs plain generation" \
  .venv/bin/python bench/bench_llm_record.py
[ -f bench/bench_show_suggest.py ] && run "show: 'did you mean' scaling with the record count" \
  .venv/bin/python bench/bench_show_suggest.py --bin $B/driftscope
command -v javac >/dev/null && run "java: TdumpWriter vs plain FileChannel.write of the same bytes" \
  bench/java/run.sh /tmp
[ -f bench/bench_guard.py ] && run "guard: all-MiniLM-L6-v2 over the ONNX backends vs the runtimes' own time" \
  .venv/bin/python bench/bench_guard.py
[ -f bench/bench_replay.py ] && run "replay: cost per origin against one plain candidate run (torch hooks, ONNX cut + variant; cold and warm)" \
  .venv/bin/python bench/bench_replay.py
[ -f bench/bench_fp16_fallback.py ] && run "float16 fallback: guard beside NVIDIA AutoCast, evaluated with float16 computed (nodes kept, cosine, wall)" \
  .venv/bin/python bench/bench_fp16_fallback.py --bin $B/driftscope
[ -f bench/bench_sensitivity.py ] && run "sensitivity ranking: MiniLM ort-int8 fallback search's builds and wall with --sensitivity vs without (ratio, lower is better)" \
  .venv/bin/python bench/bench_sensitivity.py --bin $B/driftscope
exit 0
