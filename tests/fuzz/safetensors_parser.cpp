// libFuzzer target for the safetensors header (interop::parse_safetensors). A file it accepts is
// also written back with interop::safetensors_header and parsed again: the same tensors, dtypes,
// shapes, offsets and metadata must come out (the writer and the parser agree on every input the
// parser accepts).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "interop/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  (void)interop::looks_like_safetensors(bytes);
  auto f = interop::parse_safetensors(bytes);
  if (!f.ok()) return 0;
  std::vector<interop::SafetensorsEntry> entries;
  std::string payload;
  for (const auto& t : f->tensors) {
    entries.push_back({t.name, t.dtype, t.shape, t.end - t.begin});
    payload.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
  auto h = interop::safetensors_header(entries, f->metadata);
  if (!h.ok()) return 0;  // a name or value that is not UTF-8 cannot be written back
  std::string again = *h + payload;
  auto g = interop::parse_safetensors(std::as_bytes(std::span<const char>(again)));
  if (!g.ok() || g->tensors.size() != f->tensors.size() || g->metadata != f->metadata)
    __builtin_trap();
  for (size_t i = 0; i < f->tensors.size(); ++i) {
    const auto& a = f->tensors[i];
    const auto& b = g->tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin ||
        a.end != b.end)
      __builtin_trap();
  }
  return 0;
}
