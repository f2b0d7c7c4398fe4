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

namespace driftscope {

enum class Errc : int32_t {
  ok = 0,
  // usage and environment
  invalid_argument = 1,    // a caller passed a value outside the documented range
  io_error = 2,            // open/read/write/sync/mmap failed (message has strerror)
  not_found = 3,           // lookup by name found nothing
  filter_syntax = 4,       // a filter string did not parse (docs/filters.md)
  unsupported = 5,         // valid request the implementation does not support
  closed = 6,              // operation on a closed writer
  // file header (docs/format.md §2)
  truncated_header = 20,   // file shorter than its header
  bad_magic = 21,
  unsupported_version = 22,
  bad_byte_order = 23,
  unsupported_feature = 24,
  bad_header_checksum = 25,
  // records (§3)
  bad_record_magic = 40,
  bad_frame_checksum = 41,
  bad_record_checksum = 42,
  salt_mismatch = 43,
  unknown_record_kind = 44,
  record_after_end = 45,
  bad_index = 46,
  // field values (§3.3)
  reserved_nonzero = 60,
  nonzero_padding = 61,
  length_mismatch = 62,
  limit_exceeded = 63,
  shape_overflow = 64,
  bad_dtype = 65,
  bad_enum = 66,
  bad_encoding = 67,
  bad_value = 68,
  bad_utf8 = 69,
  empty_name = 70,
  duplicate_key = 71,
  bad_axes = 72,
  duplicate_tensor = 73,
  // other input formats (import)
  bad_npz = 80,
  bad_safetensors = 81,
  // compare
  incomparable = 90,
  bad_policy = 91,
};

// Stable snake_case name of a code ("bad_magic"); "unknown" for values not in the enum.
std::string_view errc_name(Errc code) noexcept;

inline constexpr uint64_t kNoOffset = ~uint64_t{0};

struct Error {
  Errc code = Errc::ok;
  // One line, no trailing newline, offset already included; made by make_error, which spells
  // out control characters from file text in it (driftscope::printable, driftscope/text.hpp).
  std::string message;
  uint64_t offset = kNoOffset;  // file offset the error refers to, kNoOffset if none

  // "bad_frame_checksum at offset 4096: record 3 frame CRC is 0x1234, computed 0x5678"
  std::string to_string() const;
};

// Builds an Error whose message is "<what> at offset <off>" when off != kNoOffset.
Error make_error(Errc code, std::string message, uint64_t offset = kNoOffset);

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
