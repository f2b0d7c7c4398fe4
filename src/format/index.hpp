// The footer index (docs/format.md §3.4): built by the writer, probed by the reader.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/error.hpp"

namespace driftscope::detail {

struct IndexEntry {
  uint64_t offset = 0;
  uint64_t name_hash = 0;
  uint32_t occurrence = 0;
  uint32_t kind = 0;
};

// Smallest power of two >= 2n and >= 1.
uint64_t index_slot_count(uint64_t entries) noexcept;
// meta (24 bytes) and payload (entries then slots).
std::string encode_index_meta(uint64_t entries, uint64_t slots);
std::string encode_index_payload(std::span<const IndexEntry> entries, uint64_t slots);

// The one judgement of an INDEX record (docs/format.md §3.4), used by every reader mode and so
// by every tool: `expected` are the entries a scan derives from the TENSOR/SUMMARY records before
// the INDEX (private records are not indexed). Checks, in order: meta_length, hash id, reserved
// field, entry_count, slot_count (the minimal one), payload_length, every entry field, every
// slot against the table linear probing builds. `record_off` is the INDEX record's file offset;
// errors carry the offset of the failing field, the value found and the value expected.
Result<void> check_index(std::span<const std::byte> record, uint64_t record_off,
                         std::span<const IndexEntry> expected);

// A read-only view of an INDEX payload that passed check_index().
class IndexView {
 public:
  IndexView() = default;
  IndexView(const std::byte* entries, uint64_t n, const std::byte* slots, uint64_t m)
      : entries_(entries), n_(n), slots_(slots), m_(m) {}
  bool empty() const { return m_ == 0; }
  uint64_t size() const { return n_; }
  IndexEntry entry(uint64_t i) const;
  // Calls fn(entry_number) for each candidate with this hash and occurrence, in probe order,
  // until fn returns true. Returns the entry number fn accepted, or -1.
  template <class Fn>
  int64_t probe(uint64_t hash, uint32_t occurrence, Fn&& fn) const {
    if (m_ == 0) return -1;
    for (uint64_t step = 0, s = hash & (m_ - 1); step < m_; ++step, s = (s + 1) & (m_ - 1)) {
      uint32_t v = slot(s);
      if (v == 0 || v > n_) return -1;  // check_index() rules this out; a view never trusts it
      IndexEntry e = entry(v - 1);
      if (e.name_hash == hash && e.occurrence == occurrence && fn(static_cast<uint64_t>(v - 1)))
        return static_cast<int64_t>(v - 1);
    }
    return -1;
  }

 private:
  uint32_t slot(uint64_t s) const;
  const std::byte* entries_ = nullptr;
  uint64_t n_ = 0;
  const std::byte* slots_ = nullptr;
  uint64_t m_ = 0;
};

}  // namespace driftscope::detail
