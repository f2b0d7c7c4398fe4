#include "format/index.hpp"

#include "common/bytes.hpp"
#include "format/layout.hpp"

namespace driftscope::detail {

uint64_t index_slot_count(uint64_t entries) noexcept {
  uint64_t m = 1;
  while (m < 2 * entries) m <<= 1;
  return m;
}

std::string encode_index_meta(uint64_t entries, uint64_t slots) {
  std::string m;
  put_le<uint64_t>(m, entries);
  put_le<uint64_t>(m, slots);
  put_le<uint32_t>(m, kHashFnv1a64);
  put_le<uint32_t>(m, 0);
  return m;
}

std::string encode_index_payload(std::span<const IndexEntry> entries, uint64_t slots) {
  std::string p;
  p.reserve(entries.size() * kIndexEntrySize + slots * 4);
  for (const auto& e : entries) {
    put_le<uint64_t>(p, e.offset);
    put_le<uint64_t>(p, e.name_hash);
    put_le<uint32_t>(p, e.occurrence);
    put_le<uint32_t>(p, e.kind);
  }
  // Linear probing in entry order (§3.4), so every writer builds the identical table.
  std::vector<uint32_t> table(slots, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t s = entries[i].name_hash & (slots - 1);
    while (table[s] != 0) s = (s + 1) & (slots - 1);
    table[s] = static_cast<uint32_t>(i + 1);
  }
  for (uint32_t v : table) put_le<uint32_t>(p, v);
  return p;
}

IndexEntry IndexView::entry(uint64_t i) const {
  const std::byte* p = entries_ + i * kIndexEntrySize;
  return {load_le<uint64_t>(p), load_le<uint64_t>(p + 8), load_le<uint32_t>(p + 16), load_le<uint32_t>(p + 20)};
}

uint32_t IndexView::slot(uint64_t s) const { return load_le<uint32_t>(slots_ + s * 4); }

}  // namespace driftscope::detail
