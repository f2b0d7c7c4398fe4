#!/usr/bin/env bash
# Builds the Java library and runs WriterBench (ratio of TdumpWriter to a plain FileChannel.write).
#   bench/java/run.sh [DIR]     (DIR: where the scratch files go; default the JVM's temp folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
java/build.sh --no-tests >/dev/null
mkdir -p build/java/bench
javac --release 11 -Xlint:all -Werror -cp build/java/driftscope-tdump.jar -d build/java/bench bench/java/WriterBench.java
exec java -cp build/java/driftscope-tdump.jar:build/java/bench WriterBench "$@"
