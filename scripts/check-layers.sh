#!/usr/bin/env bash
# The dependency rule of HACKING.md ("Module map"), checked over the #include lines: a layer
# includes only headers of the layers above it. In particular measuring code never includes
# reporting code (src/report, include/driftscope/report.hpp, the page templates) or the single-run
# check (src/check), as zstd's "lib/ shall not depend on programs/". Clients (cli/, examples/)
# include only the public API and src/common/bytes.hpp.
# Exit 1 with one line per offending include (file:line: the include and the rule), 0 when clean.
# Run by scripts/run-tests.sh (cpp stage) and by ctest (layers.includes).
set -euo pipefail
cd "$(dirname "$0")/.."

# layer folder | include prefixes it must not use (private src/ folders, public headers, the
# generated page templates).
RULES=(
  "src/common|format/ numerics/ interop/ config/ judge/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp driftscope/interop.hpp driftscope/reference.hpp driftscope/judge.hpp"
  "src/format|numerics/ interop/ config/ judge/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp driftscope/interop.hpp driftscope/reference.hpp driftscope/judge.hpp"
  "src/numerics|interop/ config/ judge/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp driftscope/interop.hpp driftscope/reference.hpp driftscope/judge.hpp"
  "src/interop|config/ judge/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp driftscope/judge.hpp"
  "src/config|format/ numerics/ interop/ judge/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp driftscope/interop.hpp driftscope/reference.hpp driftscope/judge.hpp"
  "src/judge|interop/ config/ compare/ options/ check/ report/ reference/ capi/ driftscope/compare.hpp driftscope/check.hpp driftscope/report.hpp"
  "src/compare|options/ check/ report/ interop/ reference/ capi/ driftscope/check.hpp driftscope/report.hpp"
  "src/options|check/ report/ interop/ reference/ capi/ driftscope/check.hpp driftscope/report.hpp"
  "src/check|options/ report/ interop/ reference/ capi/ driftscope/report.hpp"
  "src/report|interop/ reference/ capi/"
  "src/reference|format/ numerics/ interop/ config/ judge/ compare/ options/ check/ report/ capi/"
)
# The HTML/CSS/JS templates are embedded as generated/<name>.inc (CMakeLists.txt): only the
# renderers may include them.
TEMPLATES='(report_html|report_css|report_common_js|guard_html|check_html)\.inc'

bad=0
complain() { echo "$1" >&2; bad=1; }
for rule in "${RULES[@]}"; do
  dir=${rule%%|*}
  forbidden=${rule#*|}
  [ -d "$dir" ] || continue
  while IFS=: read -r file line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    for f in $forbidden; do
      if [[ "$inc" == "$f"* ]]; then
        complain "$file:$line: includes \"$inc\": $dir must not depend on ${f%/} (HACKING.md, module map)"
      fi
    done
    if [[ "$dir" != src/report ]] && grep -Eq "^$TEMPLATES\$" <<<"$inc"; then
      complain "$file:$line: includes the page template \"$inc\": only src/report renders pages"
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir" || true)
done

# Clients: the public API (driftscope/..., driftscope.h), their own folder's headers, and the
# header-only src/common/bytes.hpp.
while IFS=: read -r file line text; do
  inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
  case "$inc" in
    driftscope/*|driftscope.h|common/bytes.hpp) ;;
    */*) complain "$file:$line: includes \"$inc\": clients use only the public API (include/) and common/bytes.hpp" ;;
    *) [ -f "$(dirname "$file")/$inc" ] ||
         complain "$file:$line: includes \"$inc\": clients use only the public API (include/) and common/bytes.hpp" ;;
  esac
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' cli examples --include='*.cpp' --include='*.hpp' --include='*.c' --include='*.h' || true)

# Every C/C++ file name is used once in the tree (zstd's rule; HACKING.md, module map): a name in
# a log, a profile or a review then says which file. Tracked files only (a build folder is not
# the tree); without git (a source tarball) the check is skipped.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while read -r name; do
    complain "$(git ls-files -co --exclude-standard -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.inc' | grep -E "(^|/)${name//./\\.}\$" | paste -sd' '): the file name $name is used more than once (HACKING.md: one name, one file)"
  done < <(git ls-files -co --exclude-standard -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.inc' | sed 's|.*/||' | sort | uniq -d)
fi

if [ "$bad" != 0 ]; then
  echo "check-layers: FAILED (HACKING.md, module map: a layer includes only the layers above it; one name, one file)" >&2
  exit 1
fi
echo "check-layers: every include follows the module map and every file name is unique"
