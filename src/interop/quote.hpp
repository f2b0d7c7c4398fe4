// Small text helpers for interop messages: names from hostile files are quoted with control
// characters escaped, so a message stays one line (the CLI prints it as it is).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace driftscope::interop {

// 'encoder.layers.0', with control bytes as \xNN and quote/backslash escaped.
inline std::string quote(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else if (c == '\'' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else
      out += static_cast<char>(c);
  }
  out += '\'';
  return out;
}

// "[2, 3]"
inline std::string fmt_shape(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

}  // namespace driftscope::interop
