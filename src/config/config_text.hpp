// Policy and mapping files (docs/compare.md "Policy file") into JSON values: the one reader of
// configuration text, TOML or JSON, bounded before any parser runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "driftscope/error.hpp"

namespace driftscope::config {

inline constexpr uint64_t kMaxConfigBytes = 16u << 20;
// Errors are Errc::bad_policy, "ORIGIN:LINE:COLUMN: what", one line.
Result<nlohmann::json> parse_toml(std::string_view text, std::string_view origin);
// TOML or JSON by the first non-blank character; longer than kMaxConfigBytes is limit_exceeded.
Result<nlohmann::json> parse_config(std::string_view text, std::string_view origin);
Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes);

}  // namespace driftscope::config
