#!/usr/bin/env bash
# Installs the built project into a scratch prefix, then configures, builds and runs the
# consumer project against it with find_package(driftscope).
#   check_install.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR            (ctest install.find_package_consumer)
#   check_install.sh --shared SOURCE_DIR SCRATCH_DIR [LAUNCHER]   (ctest install.shared_library)
# --shared compiles the library and the C ABI once more as shared libraries (-DBUILD_SHARED_LIBS=ON,
# nothing else: the tests, the command and the benchmarks use the library's internals), installs
# them, checks what they export (scripts/check-exports.sh), then builds the consumer, the examples
# and the C ABI test programs against the installed headers and libraries and runs them: every
# function they call must be exported. LAUNCHER: a compiler launcher such as ccache.
set -euo pipefail
if [ "$1" = --shared ]; then
  src=$2 scratch=$3 launcher=${4:-}
  rm -rf "$scratch" && mkdir -p "$scratch"
  # Release at -O1: what is checked (the exports, linking from the installed headers) is the
  # same, and the compile is a third cheaper (157.6 -> 106.9 CPU-s). The export list differs in
  # one constant the optimiser emits out of line at -O1 (CheckReport::kSchema, public anyway).
  cmake -S "$src" -B "$scratch/shared" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DDRIFTSCOPE_BUILD_CLI=OFF -DDRIFTSCOPE_BUILD_EXAMPLES=OFF -DDRIFTSCOPE_WERROR=ON \
    ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher"} >/dev/null
  # A failed build shows its last lines (ctest shows them under --output-on-failure).
  cmake --build "$scratch/shared" >"$scratch/build.log" 2>&1 || { tail -n 40 "$scratch/build.log" >&2; exit 1; }
  cmake --install "$scratch/shared" --prefix "$scratch/prefix" >/dev/null
  libdir=$(dirname "$(find "$scratch/prefix" -name libdriftscope.so -print -quit)")
  "$src/scripts/check-exports.sh" "$libdir"
  cmake -S "$src/tests/install/consumer" -B "$scratch/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release -DDS_SOURCE_DIR="$src" >/dev/null
  cmake --build "$scratch/build" >"$scratch/consumer.log" 2>&1 || { tail -n 40 "$scratch/consumer.log" >&2; exit 1; }
  b=$scratch/build
  # The programs find the installed libraries through their build RPATH; make sure they do.
  # ldd's output is read whole first: `ldd | grep -q` under pipefail failed when grep, done at
  # the first match, closed the pipe before ldd had written the rest (SIGPIPE, seen under load).
  loads=$(ldd "$b/consumer_cpp")
  grep -qF "$libdir/libdriftscope.so" <<<"$loads" || { echo "consumer_cpp does not load $libdir/libdriftscope.so" >&2; exit 1; }
  loads=$(ldd "$b/test_c_api")
  grep -qF "$libdir/libdriftscope_c.so" <<<"$loads" || { echo "test_c_api does not load $libdir/libdriftscope_c.so" >&2; exit 1; }
  "$b/consumer_cpp" "$scratch/out.tdump"
  "$b/consumer_c" "$scratch/out.tdump"
  "$b/tiny_encoder" "$scratch/encoder" && "$b/hash_reference" "$scratch/hash_reference.tdump"
  mkdir -p "$scratch/c" && "$b/test_c_api" "$scratch/c" >/dev/null && "$b/test_c_index" >/dev/null && "$b/test_c_reference" >/dev/null
  echo "shared library: consumer, examples and C ABI tests ok against $libdir"
  exit 0
fi
build=$1 src=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$scratch/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" >/dev/null
"$scratch/build/consumer_cpp" "$scratch/out.tdump"
"$scratch/build/consumer_c" "$scratch/out.tdump"
