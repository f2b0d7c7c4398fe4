#include "driftscope/error.hpp"

#include <fmt/format.h>

#include "driftscope/text.hpp"

namespace driftscope {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
#define DS_ERRC_CASE(x) \
  case Errc::x:         \
    return #x;
    DS_ERRC_CASE(ok)
    DS_ERRC_CASE(invalid_argument)
    DS_ERRC_CASE(io_error)
    DS_ERRC_CASE(not_found)
    DS_ERRC_CASE(filter_syntax)
    DS_ERRC_CASE(unsupported)
    DS_ERRC_CASE(closed)
    DS_ERRC_CASE(truncated_header)
    DS_ERRC_CASE(bad_magic)
    DS_ERRC_CASE(unsupported_version)
    DS_ERRC_CASE(bad_byte_order)
    DS_ERRC_CASE(unsupported_feature)
    DS_ERRC_CASE(bad_header_checksum)
    DS_ERRC_CASE(bad_record_magic)
    DS_ERRC_CASE(bad_frame_checksum)
    DS_ERRC_CASE(bad_record_checksum)
    DS_ERRC_CASE(salt_mismatch)
    DS_ERRC_CASE(unknown_record_kind)
    DS_ERRC_CASE(record_after_end)
    DS_ERRC_CASE(bad_index)
    DS_ERRC_CASE(reserved_nonzero)
    DS_ERRC_CASE(nonzero_padding)
    DS_ERRC_CASE(length_mismatch)
    DS_ERRC_CASE(limit_exceeded)
    DS_ERRC_CASE(shape_overflow)
    DS_ERRC_CASE(bad_dtype)
    DS_ERRC_CASE(bad_enum)
    DS_ERRC_CASE(bad_encoding)
    DS_ERRC_CASE(bad_value)
    DS_ERRC_CASE(bad_utf8)
    DS_ERRC_CASE(empty_name)
    DS_ERRC_CASE(duplicate_key)
    DS_ERRC_CASE(bad_axes)
    DS_ERRC_CASE(duplicate_tensor)
    DS_ERRC_CASE(bad_npz)
    DS_ERRC_CASE(bad_safetensors)
    DS_ERRC_CASE(incomparable)
    DS_ERRC_CASE(bad_policy)
#undef DS_ERRC_CASE
  }
  return "unknown";
}

Error make_error(Errc code, std::string message, uint64_t offset) {
  Error e;
  e.code = code;
  e.offset = offset;
  // Messages quote names and values from hostile files and reach terminals through every front
  // end (CLI, C ABI, Python exceptions): escaped once, here, they are safe wherever they go.
  e.message = offset == kNoOffset ? printable(message)
                                  : fmt::format("{} (at offset {})", printable(message), offset);
  return e;
}

std::string Error::to_string() const { return fmt::format("{}: {}", errc_name(code), message); }

}  // namespace driftscope
