// driftscope — CompactOptional<T>: the interface of std::optional<T> for a double or an int64_t,
// in sizeof(T) bytes: "no value" is one reserved bit pattern of T.
//
// For Criteria, held once per pair by a report of a million pairs: nine std::optional members
// cost 144 bytes, nine of these 72 (issue 13 §5). The reserved patterns are a NaN with a payload
// no arithmetic produces (0x7ff8'4453'4e4f'4e45, "DSNONE": any other NaN, and ±inf, are values)
// and INT64_MIN; storing the reserved pattern itself reads back as "no value". Copies keep the
// bits; comparisons are std::optional's.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace driftscope {

template <class T>
struct CompactOptionalTraits;

template <>
struct CompactOptionalTraits<double> {
  static constexpr uint64_t kNoneBits = 0x7ff8'4453'4e4f'4e45ull;
  static constexpr double none() noexcept { return std::bit_cast<double>(kNoneBits); }
  static constexpr bool is_none(double v) noexcept { return std::bit_cast<uint64_t>(v) == kNoneBits; }
};

template <>
struct CompactOptionalTraits<int64_t> {
  static constexpr int64_t none() noexcept { return std::numeric_limits<int64_t>::min(); }
  static constexpr bool is_none(int64_t v) noexcept { return v == none(); }
};

template <class T>
class CompactOptional {
  using Traits = CompactOptionalTraits<T>;

 public:
  using value_type = T;

  constexpr CompactOptional() noexcept = default;
  constexpr CompactOptional(std::nullopt_t) noexcept {}
  constexpr CompactOptional(T v) noexcept : v_(v) {}
  constexpr CompactOptional(const std::optional<T>& o) noexcept : v_(o ? *o : Traits::none()) {}

  constexpr CompactOptional& operator=(std::nullopt_t) noexcept {
    v_ = Traits::none();
    return *this;
  }
  constexpr CompactOptional& operator=(T v) noexcept {
    v_ = v;
    return *this;
  }
  constexpr CompactOptional& operator=(const std::optional<T>& o) noexcept {
    v_ = o ? *o : Traits::none();
    return *this;
  }

  constexpr bool has_value() const noexcept { return !Traits::is_none(v_); }
  constexpr explicit operator bool() const noexcept { return has_value(); }
  // Like std::optional: undefined when empty (check first), value() throws bad_optional_access.
  constexpr const T& operator*() const noexcept { return v_; }
  constexpr T& operator*() noexcept { return v_; }
  constexpr const T* operator->() const noexcept { return &v_; }
  constexpr const T& value() const {
    if (!has_value()) throw std::bad_optional_access();
    return v_;
  }
  template <class U>
  constexpr T value_or(U&& fallback) const {
    return has_value() ? v_ : static_cast<T>(std::forward<U>(fallback));
  }
  constexpr void reset() noexcept { v_ = Traits::none(); }
  constexpr T& emplace(T v) noexcept { return v_ = v; }
  constexpr operator std::optional<T>() const noexcept {
    return has_value() ? std::optional<T>(v_) : std::nullopt;
  }

  // As std::optional: empty equals empty, a value equals the same value (NaN equals nothing).
  friend constexpr bool operator==(const CompactOptional& a, const CompactOptional& b) noexcept {
    return a.has_value() == b.has_value() && (!a.has_value() || a.v_ == b.v_);
  }
  friend constexpr bool operator==(const CompactOptional& a, std::nullopt_t) noexcept { return !a.has_value(); }
  friend constexpr bool operator==(const CompactOptional& a, const T& b) noexcept {
    return a.has_value() && a.v_ == b;
  }

 private:
  T v_ = Traits::none();
};

}  // namespace driftscope
