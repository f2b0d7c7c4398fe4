// libFuzzer target for policy files (Policy::parse: the nesting pre-scan, toml++ or the JSON
// parser, the validator in src/options/settings_files.cpp): any input is a policy or a one-line
// error; a policy that parses passes validate(). Any crash, hang, leak or sanitizer report is a bug
// (issue 7 bug 3 was a stack overflow here).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "driftscope/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = Policy::parse(text, "fuzz.toml");
  if (!p.ok()) {
    if (p.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  CompareOptions o;
  o.policy = std::move(*p);
  if (!validate(o).ok()) std::abort();  // the parser admits only what the validator accepts
  for (const auto& r : o.policy.rules)
    if (r.criteria) (void)r.criteria->to_string();
  return 0;
}
