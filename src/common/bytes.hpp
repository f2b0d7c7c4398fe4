// Little-endian load/store and checked arithmetic. The format is little-endian by definition
// (docs/format.md §1); these helpers keep the code correct on a big-endian host as well.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace driftscope::detail {

template <class T>
inline T load_le(const std::byte* p) noexcept {
  T v;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof(T));
  } else {
    std::byte tmp[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) tmp[i] = p[sizeof(T) - 1 - i];
    std::memcpy(&v, tmp, sizeof(T));
  }
  return v;
}

template <class T>
inline void store_le(std::byte* p, T v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(T));
  } else {
    std::byte tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = tmp[sizeof(T) - 1 - i];
  }
}

// Appends little-endian integers and bytes to a std::string buffer.
template <class T>
inline void put_le(std::string& out, T v) {
  char tmp[sizeof(T)];
  store_le(reinterpret_cast<std::byte*>(tmp), v);
  out.append(tmp, sizeof(T));
}

inline constexpr uint64_t align64(uint64_t x) noexcept { return (x + 63) & ~uint64_t{63}; }

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Strict UTF-8 validation: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) noexcept;

// FNV-1a 64-bit (docs/format.md §3.4).
inline uint64_t fnv1a64(std::string_view s) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace driftscope::detail
