// libFuzzer target for the npz container: interop::ZipReader::open, then every member read
// (stored or inflated, CRC-checked) and parsed as .npy the way `import` does. Any crash, hang,
// leak, sanitizer report or allocation beyond libFuzzer's -rss_limit_mb is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "interop/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto z = interop::ZipReader::open(bytes);
  if (!z.ok()) return 0;
  volatile uint64_t sink = 0;
  for (const auto& m : z->members()) {
    std::vector<std::byte> inflated;
    auto body = z->read(m, inflated);
    if (!body.ok()) continue;
    auto arr = m.method == 0 ? interop::parse_npy(*body, "member")
                             : interop::parse_npy(std::move(inflated), "member");
    if (!arr.ok()) continue;
    for (std::byte b : arr->data) sink = sink + static_cast<uint64_t>(b);
  }
  (void)sink;
  return 0;
}
