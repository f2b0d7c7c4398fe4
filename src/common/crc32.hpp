// CRC-32 (ISO-HDLC, as zlib.crc32) — docs/format.md §1. Backed by ISA-L's folded VPCLMULQDQ
// kernels when the build found ISA-L (about 3x libdeflate 1.14 on AVX-512 machines), else by
// libdeflate's PCLMUL/ARMv8-CRC ones, so verifying a record costs about as much as reading it.
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
// crc32(0, a ‖ b) from crc_a = crc32(0, a), crc_b = crc32(0, b) and b's length (zlib's
// crc32_combine): checksums of pieces computed in parallel, joined in order.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) noexcept;

}  // namespace driftscope::detail
