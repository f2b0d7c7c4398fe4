// libFuzzer target for mapping files (NameMap::parse: the nesting pre-scan, toml++ or the JSON
// parser, rename rules compiled as ECMAScript regexes). Any crash, hang, leak or sanitizer report
// is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "driftscope/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = NameMap::parse(text, "fuzz.toml");
  if (!m.ok() && m.error().message.find('\n') != std::string::npos) std::abort();
  return 0;
}
