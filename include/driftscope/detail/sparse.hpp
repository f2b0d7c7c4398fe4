// driftscope — Sparse<C>: a std::vector or std::string that is usually empty, behind one pointer.
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
//
// For members that are rarely non-empty in structures held by the million (PairResult::reasons,
// PairResult::notes, ...): an empty Sparse costs 8 bytes where std::vector costs 24 and
// std::string 32, which for a report of a million pairs is hundreds of MiB (issue 13 §5). It has
// the part of C's interface the code uses, converts to `const C&` (get()), and copies and
// compares as C does. Emptying it (clear(), assigning an empty C) frees the container.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace driftscope::detail {

template <class C>
class Sparse {
 public:
  using value_type = typename C::value_type;
  using size_type = typename C::size_type;
  using reference = typename C::reference;
  using const_reference = typename C::const_reference;
  using iterator = typename C::iterator;
  using const_iterator = typename C::const_iterator;

  Sparse() noexcept = default;
  Sparse(const C& c) : p_(c.empty() ? nullptr : std::make_unique<C>(c)) {}
  Sparse(C&& c) : p_(c.empty() ? nullptr : std::make_unique<C>(std::move(c))) {}
  Sparse(std::initializer_list<value_type> il) : Sparse(C(il)) {}
  Sparse(const char* s)
    requires std::is_same_v<C, std::string>
      : Sparse(C(s)) {}
  Sparse(const Sparse& o) : p_(o.p_ ? std::make_unique<C>(*o.p_) : nullptr) {}
  Sparse(Sparse&&) noexcept = default;
  ~Sparse() = default;

  Sparse& operator=(const Sparse& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<C>(*o.p_) : nullptr;
    return *this;
  }
  Sparse& operator=(Sparse&&) noexcept = default;
  Sparse& operator=(const C& c) { return assign(c); }
  Sparse& operator=(C&& c) { return assign(std::move(c)); }
  Sparse& operator=(std::initializer_list<value_type> il) { return assign(C(il)); }
  Sparse& operator=(const char* s)
    requires std::is_same_v<C, std::string>
  {
    return assign(C(s));
  }

  // The container; a shared empty one when there is none.
  const C& get() const noexcept { return p_ ? *p_ : empty_container(); }
  operator const C&() const noexcept { return get(); }
  operator std::string_view() const noexcept
    requires std::is_same_v<C, std::string>
  {
    return get();
  }

  size_type size() const noexcept { return p_ ? p_->size() : 0; }
  bool empty() const noexcept { return !p_ || p_->empty(); }
  // Value-initialised iterators of an empty Sparse compare equal (begin() == end()).
  const_iterator begin() const noexcept { return p_ ? p_->cbegin() : const_iterator{}; }
  const_iterator end() const noexcept { return p_ ? p_->cend() : const_iterator{}; }
  iterator begin() noexcept { return p_ ? p_->begin() : iterator{}; }
  iterator end() noexcept { return p_ ? p_->end() : iterator{}; }
  const_reference operator[](size_type i) const noexcept { return (*p_)[i]; }
  reference operator[](size_type i) noexcept { return (*p_)[i]; }
  const_reference front() const noexcept { return p_->front(); }
  const_reference back() const noexcept { return p_->back(); }
  reference front() noexcept { return p_->front(); }
  reference back() noexcept { return p_->back(); }
  const value_type* data() const noexcept { return p_ ? p_->data() : nullptr; }
  const char* c_str() const noexcept
    requires std::is_same_v<C, std::string>
  {
    return get().c_str();
  }

  void clear() noexcept { p_.reset(); }
  void push_back(const value_type& v) { mut().push_back(v); }
  void push_back(value_type&& v) { mut().push_back(std::move(v)); }
  template <class... Args>
  reference emplace_back(Args&&... args) {
    return mut().emplace_back(std::forward<Args>(args)...);
  }
  template <class It>
  void assign(It first, It last) {
    assign(C(first, last));
  }
  template <class It>
  void append(It first, It last) {
    if (first != last) mut().insert(mut().end(), first, last);
  }
  void reserve(size_type n) {
    if (n) mut().reserve(n);
  }
  void resize(size_type n) {
    if (n) mut().resize(n);
    else clear();
  }
  Sparse& operator+=(std::string_view s)
    requires std::is_same_v<C, std::string>
  {
    if (!s.empty()) mut() += s;
    return *this;
  }
  // The container itself, created when there is none (for the rest of C's interface).
  C& mut() {
    if (!p_) p_ = std::make_unique<C>();
    return *p_;
  }

  friend bool operator==(const Sparse& a, const Sparse& b) { return a.get() == b.get(); }
  friend bool operator==(const Sparse& a, const C& b) { return a.get() == b; }
  friend bool operator==(const Sparse& a, const char* b)
    requires std::is_same_v<C, std::string>
  {
    return a.get() == b;
  }
  friend bool operator==(const Sparse& a, std::string_view b)
    requires std::is_same_v<C, std::string>
  {
    return std::string_view(a.get()) == b;
  }

 private:
  template <class V>
  Sparse& assign(V&& v) {
    if (v.empty()) p_.reset();
    else if (p_) *p_ = std::forward<V>(v);
    else p_ = std::make_unique<C>(std::forward<V>(v));
    return *this;
  }
  static const C& empty_container() noexcept {
    static const C empty;
    return empty;
  }
  std::unique_ptr<C> p_;
};

}  // namespace driftscope::detail
