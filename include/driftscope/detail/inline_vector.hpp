// driftscope — InlineVector<T, N>: a std::vector of a trivially copyable T that holds up to N
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
// elements in itself, more on the heap.
//
// For short lists held by the million (a shape, the coordinates of an element, the pairs an error
// came from): std::vector<uint64_t> of one element costs 24 bytes plus a 32-byte heap block; an
// InlineVector<uint64_t, 2> is 24 bytes with no heap block up to two elements (issue 13 §5). It has
// the part of std::vector's interface the code uses, converts to std::vector and std::span, and
// copies and compares as std::vector does. Iterators are pointers; like std::vector's they are
// invalidated by growth (and by moving from an InlineVector that holds its elements itself).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace driftscope::detail {

template <class T, size_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T> && N >= 1 && N * sizeof(T) >= sizeof(T*));

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() noexcept = default;
  InlineVector(size_type n, const T& v = T{}) { assign(n, v); }
  InlineVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It, class = decltype(*std::declval<It&>()), class = decltype(++std::declval<It&>())>
  InlineVector(It first, It last) {
    assign(first, last);
  }
  InlineVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }
  InlineVector(std::span<const T> s) { assign(s.begin(), s.end()); }
  InlineVector(const InlineVector& o) { assign(o.begin(), o.end()); }
  InlineVector(InlineVector&& o) noexcept { steal(o); }
  ~InlineVector() { free_heap(); }

  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      free_heap();
      steal(o);
    }
    return *this;
  }
  InlineVector& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  InlineVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return cap_; }
  // Whether the elements are in the object itself (size() <= N, never grown beyond N).
  bool is_inline() const noexcept { return cap_ == N; }
  T* data() noexcept { return is_inline() ? inline_ : heap_; }
  const T* data() const noexcept { return is_inline() ? inline_ : heap_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

  void clear() noexcept { size_ = 0; }
  void reserve(size_type n) {
    if (n > cap_) grow(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      const T copy = v;  // v may be an element of this vector
      grow(cap_ * 2);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() noexcept { --size_; }
  iterator erase(const_iterator first, const_iterator last) noexcept {
    T* f = begin() + (first - cbegin());
    const auto n = static_cast<size_t>(last - first);
    if (n) std::memmove(f, f + n, static_cast<size_t>(end() - (f + n)) * sizeof(T));
    size_ -= static_cast<uint32_t>(n);
    return f;
  }
  void resize(size_type n, const T& v = T{}) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<uint32_t>(n);
  }
  void assign(size_type n, const T& v) {
    clear();
    resize(n, v);
  }
  template <class It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>)
      reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<T>(*first));
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const InlineVector& a, const std::vector<T>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator<(const InlineVector& a, const InlineVector& b) noexcept {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void grow(size_type n) {
    n = std::max<size_type>(n, 2 * N);
    if (n > UINT32_MAX) throw std::bad_alloc();
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_) std::memcpy(p, data(), size_ * sizeof(T));
    free_heap();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void free_heap() noexcept {
    if (!is_inline()) ::operator delete(heap_);
    cap_ = N;
  }
  // Takes o's elements (its heap block, or a copy of its inline ones) and leaves it empty.
  void steal(InlineVector& o) noexcept {
    if (o.is_inline()) {
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    } else {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.cap_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  union {
    T inline_[N];
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t cap_ = N;  // N: the elements are inline_; more: heap_ holds cap_ of them
};

}  // namespace driftscope::detail
