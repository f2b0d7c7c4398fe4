// Setting one compare option from a parsed JSON value, by the rows of compare_options.hpp: the
// C ABI's options JSON (src/capi/compare_c.cpp) and compare_options_from_json share it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "driftscope/compare.hpp"
#include "driftscope/compare_options.hpp"

namespace driftscope::compare_detail {

// Command options are known only when `command` is given; any other key is "unknown compare
// option 'KEY'", a value of the wrong JSON type "compare option 'KEY' must be a number" (...).
Result<void> set_option(CompareSettings& settings, CompareCommandOptions* command,
                        const std::string& key, const nlohmann::json& value);

}  // namespace driftscope::compare_detail
