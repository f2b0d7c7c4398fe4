#include "format/index.hpp"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "common/bytes.hpp"
#include "format/layout.hpp"

namespace driftscope::detail {

namespace {
// The table linear probing builds in entry order (§3.4), without walking the probe sequences:
// entry e lands in the first empty slot cyclically at or after its home, and next[s] leads (by
// path-halved links) to the first empty slot at or after s. Each placement costs O(log n) amortised
// at worst, so names whose FNV-1a hashes share their low bits (one cluster of n entries) cost O(n log n)
// instead of the probing loop's O(n²) (issue 23 item 4: 200k such names took 11.7 s to verify).
// The bytes are those of the probing loop, slot for slot, so files and verdicts are unchanged.
template <class Link>
std::vector<uint32_t> slot_table_with(std::span<const IndexEntry> entries, uint64_t slots) {
  std::vector<uint32_t> table(slots, 0);
  const uint64_t mask = slots - 1;
  std::vector<Link> next(slots);
  for (uint64_t s = 0; s < slots; ++s) next[s] = static_cast<Link>(s);
  auto free_from = [&](Link s) {
    while (next[s] != s) {
      next[s] = next[next[s]];
      s = next[s];
    }
    return s;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    // slots >= 2n > i: an empty slot always exists, so the walk ends.
    const Link s = free_from(static_cast<Link>(entries[i].name_hash & mask));
    table[s] = static_cast<uint32_t>(i + 1);
    next[s] = static_cast<Link>((s + 1) & mask);
  }
  return table;
}

std::vector<uint32_t> slot_table(std::span<const IndexEntry> entries, uint64_t slots) {
  // 4-byte links while slot numbers fit (any file under 2^31 entries): half the scratch memory.
  return slots <= (uint64_t{1} << 32) ? slot_table_with<uint32_t>(entries, slots)
                                      : slot_table_with<uint64_t>(entries, slots);
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

namespace {
struct SipKey {
  uint64_t k0, k1;
};

SipKey process_key() {
  static const SipKey key = []() noexcept {
    try {
      std::random_device rd;
      auto word = [&] { return (uint64_t{rd()} << 32) ^ rd(); };
      return SipKey{word(), word()};
    } catch (...) {
      // No entropy source: the clock and an address still differ between runs.
      const auto t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      return SipKey{t ^ reinterpret_cast<uintptr_t>(&t), t * 0x9e3779b97f4a7c15ull};
    }
  }();
  return key;
}

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct Sip {
  uint64_t v0, v1, v2, v3;
  explicit Sip(SipKey k)
      : v0(k.k0 ^ 0x736f6d6570736575ull), v1(k.k1 ^ 0x646f72616e646f6dull),
        v2(k.k0 ^ 0x6c7967656e657261ull), v3(k.k1 ^ 0x7465646279746573ull) {}
  void round() {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
  void word(uint64_t m) {
    v3 ^= m;
    round();
    v0 ^= m;
  }
  uint64_t finish() {
    v2 ^= 0xff;
    round(); round(); round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};
}  // namespace

uint64_t keyed_name_hash(std::string_view name, uint64_t tail) noexcept {
  Sip s(process_key());
  const auto* p = reinterpret_cast<const std::byte*>(name.data());
  size_t n = name.size(), i = 0;
  for (; i + 8 <= n; i += 8) s.word(load_le<uint64_t>(p + i));
  // The last partial word carries the length in its top byte (SipHash padding); the tail word
  // follows, so (name, tail) pairs never share a message.
  uint64_t last = uint64_t{static_cast<uint8_t>(n)} << 56;
  for (size_t j = 0; i + j < n; ++j) last |= uint64_t{std::to_integer<uint8_t>(p[i + j])} << (8 * j);
  s.word(last);
  s.word(tail);
  return s.finish();
}

}  // namespace driftscope::detail
