// driftscope — error codes and the Result type shared by every API.
//
// Contract: no function of the library throws on bad input, aborts or prints. Every fallible call
// returns Result<T>, whose error carries a stable code (numeric values never change; they are also
// the C ABI's negated status codes and the Python exception mapping key), a message that names the
// field, the value found and the allowed range, and the file offset where that applies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "driftscope/api.h"

namespace driftscope {

// Every value, its meaning and the C ABI status are tabled in docs/c-api.md ("Status codes").
enum class Errc : int32_t {
  ok = 0,  // success; never the code of an Error
  // usage and environment
  invalid_argument = 1,      // a caller passed a value outside the documented range
  io_error = 2,              // open/read/write/sync/mmap failed (message has strerror)
  not_found = 3,             // a lookup by name found nothing
  filter_syntax = 4,         // a filter string did not parse (docs/filters.md)
  unsupported = 5,           // valid request the implementation does not support
  closed = 6,                // a write, flush or commit on a writer or output already closed
  // file header (docs/format.md §2)
  truncated_header = 20,     // the file is shorter than its header
  bad_magic = 21,            // the file does not start with the TDUMP magic: not a dump
  unsupported_version = 22,  // format major version is not 1
  bad_byte_order = 23,       // the byte-order mark is not 0x01020304
  unsupported_feature = 24,  // required feature bits this reader does not know
  bad_header_checksum = 25,  // the header's CRC-32 does not match
  // records (§3)
  bad_record_magic = 40,     // a record frame does not start with the record magic
  bad_frame_checksum = 41,   // a record frame's CRC-32 does not match
  bad_record_checksum = 42,  // a record's meta+payload CRC-32 does not match
  salt_mismatch = 43,        // a record carries another file's salt (spliced bytes)
  unknown_record_kind = 44,  // an unknown record kind not marked skippable (§3.2)
  record_after_end = 45,     // bytes follow the END record
  bad_index = 46,            // the footer INDEX disagrees with the records or its layout (§3.4)
  // field values (§3.3)
  reserved_nonzero = 60,     // a reserved field or flag bit is not zero (§1)
  nonzero_padding = 61,      // alignment padding is not zero (§1)
  length_mismatch = 62,      // a length disagrees with its parts, or a meta ends inside a field
  limit_exceeded = 63,       // a count or length is over a limit (§6), checked before allocating
  shape_overflow = 64,       // element count or byte size overflows 64 bits
  bad_dtype = 65,            // a dtype code is not defined
  bad_enum = 66,             // another enumerated field (role, encoding, kind) is out of range
  bad_encoding = 67,         // quantisation fields that do not fit the tensor
  bad_value = 68,            // a field's value is outside its allowed range (a non-finite scale)
  bad_utf8 = 69,             // a name, key or value that must be UTF-8 is not
  empty_name = 70,           // a tensor name is empty
  duplicate_key = 71,        // a metadata key or attribute appears twice
  bad_axes = 72,             // axis names do not match the rank, or one is empty or has a comma
  duplicate_tensor = 73,     // a tensor identity appears twice (a reader warning; first one used)
  // other input formats (import)
  bad_npz = 80,              // a malformed .npy/.npz input (ZIP or npy header)
  bad_safetensors = 81,      // a malformed .safetensors input
  // compare
  incomparable = 90,         // a pair that cannot be compared (element counts differ)
  bad_policy = 91,           // an invalid policy or mapping file (ORIGIN:LINE:COLUMN: what)
};

// Stable snake_case name of a code ("bad_magic"); "unknown" for values not in the enum.
DS_API std::string_view errc_name(Errc code) noexcept;

inline constexpr uint64_t kNoOffset = ~uint64_t{0};

struct DS_API Error {
  Errc code = Errc::ok;
  // One line, no trailing newline, offset already included; made by make_error, which spells
  // out control characters from file text in it (driftscope::printable, driftscope/text.hpp).
  std::string message;
  uint64_t offset = kNoOffset;  // file offset the error refers to, kNoOffset if none

  // "bad_frame_checksum at offset 4096: record 3 frame CRC is 0x1234, computed 0x5678"
  std::string to_string() const;
};

// Builds an Error whose message is "<what> at offset <off>" when off != kNoOffset.
DS_API Error make_error(Errc code, std::string message, uint64_t offset = kNoOffset);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), has_error_(true) {}  // NOLINT
  bool ok() const noexcept { return !has_error_; }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
  bool has_error_ = false;
};

}  // namespace driftscope

// Propagates an error from an expression returning Result<...>.
#define DRIFTSCOPE_TRY_CAT2_(a, b) a##b
#define DRIFTSCOPE_TRY_CAT_(a, b) DRIFTSCOPE_TRY_CAT2_(a, b)
#define DRIFTSCOPE_TRY(expr) DRIFTSCOPE_TRY_IMPL_(expr, DRIFTSCOPE_TRY_CAT_(ds_try_r_, __LINE__))
#define DRIFTSCOPE_TRY_IMPL_(expr, var)                  \
  do {                                                  \
    auto&& var = (expr);                                \
    if (!var.ok()) return std::move(var).error();       \
  } while (0)
