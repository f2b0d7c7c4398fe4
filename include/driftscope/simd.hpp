// driftscope — which SIMD code the numeric kernels run. Every kernel returns the same bits on
// every target (docs/metrics.md §8), so the choice changes speed only; it is there for bug
// reports, benchmarks and for checking that promise on one machine (DRIFTSCOPE_SIMD, docs/cli.md
// "Environment").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"

namespace driftscope {

// The targets this build has and this CPU runs, best first, in Highway's names ("AVX3", "AVX2",
// "SSE4", ...), then "scalar" (the reference loops every target is tested against).
DS_API std::vector<std::string> simd_targets();

// The target the kernels run now: the CPU's best unless use_simd_target chose another.
DS_API std::string simd_target();

// Runs every kernel of the process on `name`, one of simd_targets() (those better than it are
// switched off; a module that lacks it runs the next one below). Call before any comparison
// starts, on one thread; a later call may choose again. Errors: invalid_argument naming the
// choices (the kernels then run the CPU's best).
DS_API Result<void> use_simd_target(std::string_view name);

// use_simd_target($DRIFTSCOPE_SIMD) when that is set and not empty, else nothing: what the
// driftscope command and the Python package call when they start.
DS_API Result<void> use_simd_target_from_env();

}  // namespace driftscope
