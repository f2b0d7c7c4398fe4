#!/usr/bin/env bash
# Installs the built project into a scratch prefix, then configures, builds and runs the
# consumer project against it with find_package(driftscope).
#   check_install.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR
set -euo pipefail
build=$1 src=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$scratch/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" >/dev/null
"$scratch/build/consumer_cpp" "$scratch/out.tdump"
"$scratch/build/consumer_c" "$scratch/out.tdump"
