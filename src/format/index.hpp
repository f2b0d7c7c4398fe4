// The footer index (docs/format.md §3.4): built by the writer, checked by the reader.
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

// SipHash-1-3 rounds (Aumasson & Bernstein) over `name`, its length and the 8 bytes `tail`, under a key
// drawn once per process from std::random_device. The in-memory lookup tables of the readers use
// it instead of the file's FNV-1a hashes: anyone can choose names whose FNV-1a hashes share their
// low bits (or all 64), which turns a table keyed by them into one probe chain (issue 23 item 4),
// while without the key nobody can predict which names collide here.
uint64_t keyed_name_hash(std::string_view name, uint64_t tail) noexcept;

}  // namespace driftscope::detail
