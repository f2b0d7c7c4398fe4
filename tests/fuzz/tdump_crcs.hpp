// Shared by the TDUMP fuzz targets: the input with every CRC made to match, so that mutations
// reach the checks behind the checksums (a crafted INDEX slot table once crashed lookups because
// the fuzzer never got a CRC-valid INDEX past the frame check). docs/format.md §2-§3 frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/bytes.hpp"
#include "common/crc32.hpp"

namespace ds_fuzz {

inline uint64_t le(const std::vector<std::byte>& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}

inline void put32(std::vector<std::byte>& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i));
}

inline std::vector<std::byte> with_crcs_fixed(std::span<const std::byte> in) {
  using namespace driftscope::detail;
  std::vector<std::byte> b(in.begin(), in.end());
  if (b.size() < 64) return b;
  const uint64_t meta_len = le(b, 36, 4);
  if (64 + meta_len <= b.size()) put32(b, 60, crc32(crc32(0, b.data(), 60), b.data() + 64, meta_len));
  for (uint64_t pos = align64(le(b, 32, 4)); pos >= 64 && pos + 48 <= b.size();) {
    put32(b, pos + 40, crc32(0, b.data() + pos, 40));
    const uint64_t len = le(b, pos + 8, 8), plen = le(b, pos + 16, 8), mlen = le(b, pos + 24, 4);
    const uint64_t pstart = align64(48 + mlen);
    if (mlen > b.size() || plen > b.size() || pos + pstart + plen > b.size()) break;
    uint32_t c = crc32(0, b.data() + pos, 44);
    c = crc32(c, b.data() + pos + 48, mlen);
    put32(b, pos + 44, crc32(c, b.data() + pos + pstart, plen));
    if (len < 64 || len % 64 != 0 || len > b.size() - pos) break;
    pos += len;
  }
  return b;
}

}  // namespace ds_fuzz
