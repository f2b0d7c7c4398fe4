// libFuzzer target for dump-set manifests and axis annotations (docs/dumpsets.md §2, §4;
// src/format/dumpset.cpp): any manifest text is a set or a one-line error; a set's ranks are
// consistent with its groups; every axis of the input's lines parses or is an error, and the
// shard spec of the axis list is built or refused. Any crash, hang, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/dumpset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto s = DumpSet::parse_manifest(text, "/nonexistent");
  if (s.ok()) {
    if (s->ranks.size() != s->world_size) std::abort();
    uint64_t product = 1;
    for (const auto& [name, n] : s->groups) product *= n;
    if (!s->groups.empty() && product != s->world_size) std::abort();
    for (const RankEntry& r : s->ranks) {
      if (r.coords.size() != s->groups.size()) std::abort();
      volatile size_t n = s->coords_text(r.rank).size();
      (void)n;
    }
  } else if (s.error().message.find('\n') != std::string::npos) {
    std::abort();  // errors are one line
  }
  // The same bytes as axis names, one per line.
  std::vector<std::string> axes;
  size_t start = 0;
  while (start <= size && axes.size() < 17) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = size;
    axes.emplace_back(text.substr(start, end - start));
    (void)parse_axis_annotation(axes.back());
    start = end + 1;
  }
  (void)parse_shard_spec(axes);
  return 0;
}
