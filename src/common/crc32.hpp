// CRC-32 (ISO-HDLC, as zlib.crc32) — docs/format.md §1. Backed by libdeflate's folded
// PCLMUL/ARMv8-CRC kernels, so verifying a record costs about as much as reading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace driftscope::detail {

// crc32(crc32(0, a), b) == crc32(0, a ‖ b): pass the previous value to continue.
uint32_t crc32(uint32_t crc, const void* data, size_t size) noexcept;
inline uint32_t crc32(uint32_t crc, std::span<const std::byte> s) noexcept {
  return crc32(crc, s.data(), s.size());
}

}  // namespace driftscope::detail
