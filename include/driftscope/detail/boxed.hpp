// driftscope — Boxed<T>: the interface of std::optional<T> with the value on the heap.
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
//
// For members that are rarely set in structures held by the million (PairResult::detail and
// ::layout, Record::summary): an empty Boxed costs one pointer where std::optional costs
// sizeof(T), which for a report of a million pairs is hundreds of MiB (issue 13 §5). Copies copy
// the value, as std::optional's do.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace driftscope::detail {

template <class T>
class Boxed {
 public:
  using value_type = T;

  Boxed() noexcept = default;
  Boxed(std::nullopt_t) noexcept {}
  Boxed(const T& v) : p_(std::make_unique<T>(v)) {}
  Boxed(T&& v) : p_(std::make_unique<T>(std::move(v))) {}
  Boxed(const std::optional<T>& v) : p_(v ? std::make_unique<T>(*v) : nullptr) {}
  Boxed(std::optional<T>&& v) : p_(v ? std::make_unique<T>(std::move(*v)) : nullptr) {}
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  ~Boxed() = default;

  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(std::nullopt_t) noexcept {
    p_.reset();
    return *this;
  }
  Boxed& operator=(const T& v) { return assign(v); }
  Boxed& operator=(T&& v) { return assign(std::move(v)); }
  Boxed& operator=(const std::optional<T>& v) {
    if (v) return assign(*v);
    p_.reset();
    return *this;
  }
  Boxed& operator=(std::optional<T>&& v) {
    if (v) return assign(std::move(*v));
    p_.reset();
    return *this;
  }

  bool has_value() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  // Like std::optional: undefined when empty (check first), value() throws bad_optional_access.
  T& operator*() & noexcept { return *p_; }
  const T& operator*() const& noexcept { return *p_; }
  T* operator->() noexcept { return p_.get(); }
  const T* operator->() const noexcept { return p_.get(); }
  T& value() & {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }
  const T& value() const& {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }
  template <class U>
  T value_or(U&& fallback) const {
    return p_ ? *p_ : static_cast<T>(std::forward<U>(fallback));
  }
  void reset() noexcept { p_.reset(); }
  template <class... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }

  friend bool operator==(const Boxed& a, std::nullopt_t) noexcept { return !a.p_; }
  friend bool operator==(const Boxed& a, const Boxed& b)
    requires requires(const T& x) { x == x; }
  {
    return a.p_ && b.p_ ? *a.p_ == *b.p_ : a.p_ == b.p_;
  }

 private:
  template <class V>
  Boxed& assign(V&& v) {
    if (p_) *p_ = std::forward<V>(v);
    else p_ = std::make_unique<T>(std::forward<V>(v));
    return *this;
  }
  std::unique_ptr<T> p_;
};

}  // namespace driftscope::detail
