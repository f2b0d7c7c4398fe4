#include "common/crc32.hpp"

#include <libdeflate.h>

namespace driftscope::detail {

uint32_t crc32(uint32_t crc, const void* data, size_t size) noexcept {
  // libdeflate_crc32(crc, NULL, 0) returns the *initial* value, not `crc`: guard empty input.
  if (size == 0) return crc;
  return libdeflate_crc32(crc, data, size);
}

}  // namespace driftscope::detail
