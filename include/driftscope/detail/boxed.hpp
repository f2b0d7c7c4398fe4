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

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
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


// SharedBox<T>: a Boxed<T> whose copies share the value until one of them is edited (copy on
// write, the count thread-safe as std::shared_ptr's). For TensorDesc's data-flow box: the PyTorch
// recorder gives a pair's two descriptions equal inputs and source, and a million pairs held them
// as two 56-byte boxes each where one shared box serves both (issue 30 item 4). One pointer when
// empty; the value and its count in one block.
template <class T>
class SharedBox {
 public:
  using value_type = T;

  SharedBox() noexcept = default;
  SharedBox(const SharedBox& o) noexcept : n_(o.n_) { retain(); }
  SharedBox(SharedBox&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  ~SharedBox() { release(); }
  SharedBox& operator=(const SharedBox& o) noexcept {
    if (n_ != o.n_) {
      o.retain();
      release();
      n_ = o.n_;
    }
    return *this;
  }
  SharedBox& operator=(SharedBox&& o) noexcept {
    if (this != &o) {
      release();
      n_ = std::exchange(o.n_, nullptr);
    }
    return *this;
  }

  bool has_value() const noexcept { return n_ != nullptr; }
  explicit operator bool() const noexcept { return n_ != nullptr; }
  // Reading: undefined when empty (check first).
  const T& operator*() const noexcept { return n_->value; }
  const T* operator->() const noexcept { return &n_->value; }
  // Writing: makes the value when empty and a copy of its own when shared, so an edit is never
  // seen through another box.
  T& edit() {
    if (!n_) {
      n_ = new Node{};
    } else if (n_->refs.load(std::memory_order_acquire) != 1) {
      Node* own = new Node{n_->value};
      release();
      n_ = own;
    }
    return n_->value;
  }
  void reset() noexcept {
    release();
    n_ = nullptr;
  }
  // This box holds the same block as `o` (not only an equal value).
  bool shares_with(const SharedBox& o) const noexcept { return n_ && n_ == o.n_; }

  friend bool operator==(const SharedBox& a, const SharedBox& b)
    requires requires(const T& x) { x == x; }
  {
    return a.n_ == b.n_ || (a.n_ && b.n_ && a.n_->value == b.n_->value);
  }

 private:
  struct Node {
    T value{};
    std::atomic<uint32_t> refs{1};
  };
  void retain() const noexcept {
    if (n_) n_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    if (n_ && n_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete n_;
  }
  Node* n_ = nullptr;
};

}  // namespace driftscope::detail
