#!/usr/bin/env bash
# What a shared driftscope library exports (HACKING.md "Public API"), from its dynamic symbol table:
#   scripts/check-exports.sh LIBDIR
# LIBDIR holds libdriftscope.so and libdriftscope_c.so of a build with -DBUILD_SHARED_LIBS=ON
# (tests/install/check_install.sh installs one and runs this on it; ctest install.shared_library).
# Fails, listing the offenders, when
#   - libdriftscope.so exports a name outside namespace driftscope (fmt::, nlohmann::, hwy::, std::
#     template code, ...) or one of the library's internal namespaces (driftscope::detail,
#     compare_detail, report_detail, numerics, config, interop, capi, anonymous), or nothing at all;
#   - libdriftscope_c.so exports anything but the ds_ functions of include/driftscope.h, or misses one
#     of them (a declaration without DS_C_API).
# Names are classified by their mangled form (the outermost name is driftscope's, whatever the return
# type of a template) and printed demangled. Prints one count line per library when clean.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: scripts/check-exports.sh LIBDIR" >&2; exit 2; }
libdir=$1
command -v nm >/dev/null || { echo "check-exports: nm not found (binutils)" >&2; exit 2; }

bad=0
# Symbols the linker defines in every shared object.
LINKER='^(_init|_fini|_edata|_end|__bss_start)$'
# Mangled names whose outermost scope is namespace driftscope: functions and data (_ZN, const /
# volatile / ref-qualified members _ZNK.., _ZNR.., _ZNO..), vtables, typeinfo and its name, VTTs,
# guard variables, and the thunks of virtual functions.
DRIFTSCOPE='^_Z(T[VTIS]|GV|Th[n0-9]*_|Tv[n0-9_]*_)?N[rVKRO]*10driftscope'
# Namespaces of the library's internals: never exported, even from a public class's inline code.
INTERNAL='driftscope::([a-z_]*detail|numerics|config|interop|capi|cli|py)::|\(anonymous namespace\)'
# The two storage classes of include/driftscope/detail/ with out-of-line members: not API, but the
# inline copy and destruction of a public PairResult or TensorDesc in a client calls them.
STORAGE='^driftscope::detail::(Interned|SharedString)::|^driftscope::detail::operator<<\(std::ostream&, driftscope::detail::SharedString const&\)'

list() {  # the first 40 arguments, one a line, then how many more
  local i=0 x
  for x; do
    i=$((i + 1))
    [ $i -le 40 ] && printf '  %s\n' "$x"
  done
  if [ $# -gt 40 ]; then echo "  ... and $(($# - 40)) more"; fi
}

exports() {  # LIB -> "mangled<TAB>demangled" per defined dynamic symbol
  paste <(nm -D --defined-only --format=posix "$1" | awk '{print $1}') \
        <(nm -D --defined-only --format=posix -C "$1" | sed -E 's/ [A-Za-z] [0-9a-f]*( [0-9a-f]+)?$//')
}

check_cpp() {
  local lib=$1 n=0 outside=() internal=() mangled demangled
  while IFS=$'\t' read -r mangled demangled; do
    [[ $mangled =~ $LINKER ]] && continue
    if [[ ! $mangled =~ $DRIFTSCOPE ]]; then
      outside+=("$demangled")
    elif [[ $demangled =~ $INTERNAL && ! $demangled =~ $STORAGE ]]; then
      internal+=("$demangled")
    else
      n=$((n + 1))
    fi
  done < <(exports "$lib")
  if [ ${#outside[@]} -gt 0 ]; then
    bad=1
    echo "check-exports: $lib exports ${#outside[@]} names outside namespace driftscope (only DS_API names may be exported: hidden visibility hides the rest, cmake/driftscope.map what the compiler cannot):" >&2
    list "${outside[@]}" >&2
  fi
  if [ ${#internal[@]} -gt 0 ]; then
    bad=1
    echo "check-exports: $lib exports ${#internal[@]} names of the library's internal namespaces:" >&2
    list "${internal[@]}" >&2
  fi
  if [ "$n" -eq 0 ]; then
    bad=1
    echo "check-exports: $lib exports nothing of namespace driftscope: is it a shared build with DS_API?" >&2
  fi
  echo "check-exports: $(basename "$lib"): $n symbols exported, $((${#outside[@]} + ${#internal[@]})) outside the public API"
}

check_c() {
  local lib=$1 extra=() missing=() mangled demangled
  local -A declared=() exported=()
  while read -r name; do declared[$name]=1; done < <(
    grep -oE '^DS_C_API [^(]*[^a-z0-9_(]ds_[a-z0-9_]+\(' include/driftscope.h | grep -oE 'ds_[a-z0-9_]+\($' | tr -d '(')
  while IFS=$'\t' read -r mangled demangled; do
    [[ $mangled =~ $LINKER ]] && continue
    if [ -n "${declared[$mangled]:-}" ]; then exported[$mangled]=1; else extra+=("$demangled"); fi
  done < <(exports "$lib")
  for name in "${!declared[@]}"; do [ -n "${exported[$name]:-}" ] || missing+=("$name"); done
  if [ ${#extra[@]} -gt 0 ]; then
    bad=1
    echo "check-exports: $lib exports ${#extra[@]} names that include/driftscope.h does not declare:" >&2
    list "${extra[@]}" >&2
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    bad=1
    echo "check-exports: $lib does not export ${#missing[@]} functions include/driftscope.h declares (DS_C_API missing?):" >&2
    list $(printf '%s\n' "${missing[@]}" | sort) >&2
  fi
  echo "check-exports: $(basename "$lib"): ${#exported[@]} of the ${#declared[@]} ds_ functions of driftscope.h exported, ${#extra[@]} other names"
}

for name in libdriftscope.so libdriftscope_c.so; do
  [ -e "$libdir/$name" ] || { echo "check-exports: $libdir/$name not found (a -DBUILD_SHARED_LIBS=ON build installed there?)" >&2; exit 2; }
done
check_cpp "$libdir/libdriftscope.so"
check_c "$libdir/libdriftscope_c.so"
if [ "$bad" != 0 ]; then
  echo "check-exports: FAILED (HACKING.md, public API: a shared build exports only DS_API / DS_C_API names)" >&2
  exit 1
fi
