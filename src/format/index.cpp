#include "format/index.hpp"

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "format/layout.hpp"

namespace driftscope::detail {

namespace {
std::vector<uint32_t> slot_table(std::span<const IndexEntry> entries, uint64_t slots) {
  std::vector<uint32_t> table(slots, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t s = entries[i].name_hash & (slots - 1);
    while (table[s] != 0) s = (s + 1) & (slots - 1);
    table[s] = static_cast<uint32_t>(i + 1);
  }
  return table;
}
}  // namespace

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
  for (uint32_t v : slot_table(entries, slots)) put_le<uint32_t>(p, v);
  return p;
}

Result<void> check_index(std::span<const std::byte> record, uint64_t record_off,
                         std::span<const IndexEntry> expected) {
  const Frame f = load_frame(record.data());
  if (f.meta_length != kIndexMetaSize)
    return make_error(Errc::length_mismatch, fmt::format("INDEX meta_length is {}, expected {}", f.meta_length,
                                                         kIndexMetaSize), record_off + frm::meta_length);
  const std::byte* m = record.data() + kFrameSize;
  const uint64_t meta_off = record_off + kFrameSize;
  const uint64_t n = load_le<uint64_t>(m), slots = load_le<uint64_t>(m + 8);
  const uint32_t hash = load_le<uint32_t>(m + 16);
  if (hash != kHashFnv1a64)
    return make_error(Errc::bad_index, fmt::format("INDEX hash is {}, expected 1 (FNV-1a 64)", hash), meta_off + 16);
  for (size_t i = 20; i < kIndexMetaSize; ++i)
    if (m[i] != std::byte{0})
      return make_error(Errc::reserved_nonzero, "INDEX reserved field is not zero", meta_off + i);
  if (n != expected.size())
    return make_error(Errc::bad_index, fmt::format("INDEX entry_count is {}, a scan finds {} TENSOR/SUMMARY records",
                                                   n, expected.size()), meta_off);
  const uint64_t want_slots = index_slot_count(n);
  if (slots != want_slots)
    return make_error(Errc::bad_index, fmt::format("INDEX slot_count is {}, expected {} for {} entries",
                                                   slots, want_slots, n), meta_off + 8);
  const uint64_t want_payload = n * kIndexEntrySize + slots * 4;
  if (f.payload_length != want_payload)
    return make_error(Errc::length_mismatch, fmt::format("INDEX payload_length is {}, expected {}",
                                                         f.payload_length, want_payload),
                      record_off + frm::payload_length);
  const std::byte* p = record.data() + payload_start(f.meta_length);
  const uint64_t payload_off = record_off + payload_start(f.meta_length);
  for (uint64_t i = 0; i < n; ++i) {
    const std::byte* e = p + i * kIndexEntrySize;
    const IndexEntry& want = expected[static_cast<size_t>(i)];
    struct Field { const char* name; uint64_t rel, got, want; };
    const Field fields[] = {
        {"offset", 0, load_le<uint64_t>(e), want.offset},
        {"name_hash", 8, load_le<uint64_t>(e + 8), want.name_hash},
        {"occurrence", 16, load_le<uint32_t>(e + 16), want.occurrence},
        {"kind", 20, load_le<uint32_t>(e + 20), want.kind},
    };
    for (const Field& fd : fields)
      if (fd.got != fd.want)
        return make_error(Errc::bad_index, fmt::format("INDEX entry {} {} is 0x{:x}, a scan finds 0x{:x}", i, fd.name,
                                                       fd.got, fd.want), payload_off + i * kIndexEntrySize + fd.rel);
  }
  const std::vector<uint32_t> table = slot_table(expected, slots);
  const std::byte* s = p + n * kIndexEntrySize;
  for (uint64_t i = 0; i < slots; ++i) {
    uint32_t got = load_le<uint32_t>(s + 4 * i);
    if (got != table[static_cast<size_t>(i)])
      return make_error(Errc::bad_index, fmt::format("INDEX slot {} holds {}, linear probing in entry order puts {} there",
                                                     i, got, table[static_cast<size_t>(i)]),
                        payload_off + n * kIndexEntrySize + 4 * i);
  }
  return {};
}

IndexEntry IndexView::entry(uint64_t i) const {
  const std::byte* p = entries_ + i * kIndexEntrySize;
  return {load_le<uint64_t>(p), load_le<uint64_t>(p + 8), load_le<uint32_t>(p + 16), load_le<uint32_t>(p + 20)};
}

uint32_t IndexView::slot(uint64_t s) const { return load_le<uint32_t>(slots_ + s * 4); }

}  // namespace driftscope::detail
