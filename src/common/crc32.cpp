#include "common/crc32.hpp"

#include <libdeflate.h>
#include <zlib.h>
#if DRIFTSCOPE_HAVE_ISAL
#include <isa-l/crc.h>
#endif

namespace driftscope::detail {

uint32_t crc32(uint32_t crc, const void* data, size_t size) noexcept {
  // libdeflate_crc32(crc, NULL, 0) returns the *initial* value, not `crc`: guard empty input.
  if (size == 0) return crc;
#if DRIFTSCOPE_HAVE_ISAL
  // The same CRC (reflected 0xEDB88320, pre- and post-inverted, continuable) as zlib's crc32;
  // ISA-L dispatches to 512-bit VPCLMULQDQ folding where the CPU has it.
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), size);
#else
  return libdeflate_crc32(crc, data, size);
#endif
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) noexcept {
  if (len_b == 0) return crc_a;
  static_assert(sizeof(z_off_t) >= 8, "payload lengths need a 64-bit z_off_t");
  return static_cast<uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(len_b)));
}

}  // namespace driftscope::detail
