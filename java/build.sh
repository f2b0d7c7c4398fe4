#!/usr/bin/env bash
# Builds the JDK-only TDUMP library (java/, package org.driftscope.tdump) and runs its tests.
#   java/build.sh              compile main + tests into build/java, make the jar, run every *Test
#   java/build.sh --no-tests   compile and make the jar only (what the Python tests and docs use)
# Needs only a JDK >= 11 (javac, jar, java); the code is compiled with --release 11 so Android
# toolchains accept it. Exits non-zero when a compile fails or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
run_tests=1
[ "${1:-}" = "--no-tests" ] && run_tests=0
OUT=build/java
JAVAC=(javac --release 11 -encoding UTF-8 -Xlint:all -Werror)
rm -rf "$OUT/classes" "$OUT/test-classes"
mkdir -p "$OUT"
mapfile -t main_src < <(find java/src/main/java -name '*.java' | sort)
"${JAVAC[@]}" -d "$OUT/classes" "${main_src[@]}"
jar --create --file "$OUT/driftscope-tdump.jar" -C "$OUT/classes" .
mapfile -t test_src < <(find java/src/test/java -name '*.java' | sort)
"${JAVAC[@]}" -cp "$OUT/driftscope-tdump.jar" -d "$OUT/test-classes" "${test_src[@]}"
echo "java/build.sh: built $OUT/driftscope-tdump.jar (${#main_src[@]} sources) and $OUT/test-classes"
[ "$run_tests" = 1 ] || exit 0

failed=()
mapfile -t tests < <(cd java/src/test/java && find . -name '*Test.java' | sed 's|^\./||; s|\.java$||; s|/|.|g' | sort)
for t in "${tests[@]}"; do
  if ! java -ea -cp "$OUT/driftscope-tdump.jar:$OUT/test-classes" "$t"; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "java/build.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "java/build.sh: all ${#tests[@]} test classes passed"
