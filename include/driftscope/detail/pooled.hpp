// driftscope — Pooled<T>: an immutable value of few distinct values (the criteria a pair was
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
// judged by), held as one pointer into a process-wide pool.
//
// A report of a million pairs holds one Criteria per pair (72 bytes), nearly always one of a
// handful of values: pooled, 8 bytes (issue 13 §5). Values with the same bytes share one copy in
// a pool per T that only grows; once it holds kMaxValues, a new value gets a copy of its own
// instead (same behaviour, only larger), so values from a file cannot grow it without bound.
// Reading needs no lock; making one locks the pool unless the thread made the same value last.
// T must be trivially copyable (values are compared byte for byte) and default-constructible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <type_traits>

namespace driftscope::detail {

template <class T>
class Pooled {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);

 public:
  static constexpr size_t kMaxValues = 4096;

  Pooled() noexcept = default;  // T{}
  Pooled(const T& v) : bits_(make(v)) {}
  Pooled(const Pooled& o) : bits_(o.bits_) {
    if (bits_ & 1) bits_ = reinterpret_cast<uintptr_t>(new T(o.get())) | 1;
  }
  Pooled(Pooled&& o) noexcept : bits_(o.bits_) { o.bits_ = 0; }
  ~Pooled() { release(); }
  Pooled& operator=(const Pooled& o) {
    if (this != &o) *this = Pooled(o);
    return *this;
  }
  Pooled& operator=(Pooled&& o) noexcept {
    if (this != &o) {
      release();
      bits_ = o.bits_;
      o.bits_ = 0;
    }
    return *this;
  }
  Pooled& operator=(const T& v) { return *this = Pooled(v); }

  const T& get() const noexcept {
    return bits_ ? *reinterpret_cast<const T*>(bits_ & ~uintptr_t{1}) : default_value();
  }
  operator const T&() const noexcept { return get(); }
  const T& operator*() const noexcept { return get(); }
  const T* operator->() const noexcept { return &get(); }

  friend bool operator==(const Pooled& a, const Pooled& b) noexcept { return same(a.get(), b.get()); }
  friend bool operator==(const Pooled& a, const T& b) noexcept { return same(a.get(), b); }

 private:
  static bool same(const T& a, const T& b) noexcept { return std::memcmp(&a, &b, sizeof(T)) == 0; }
  static const T& default_value() noexcept {
    static const T v{};
    return v;
  }
  struct Pool {
    std::mutex mutex;
    std::deque<T> values;  // addresses never change while the pool lives (it never shrinks)
  };
  static Pool& pool() {
    static Pool* p = new Pool;  // never destroyed: values may outlive static destructors
    return *p;
  }
  // 0: T{}; else the address of the value, with bit 0 set when this object owns it.
  static uintptr_t make(const T& v) {
    if (same(v, default_value())) return 0;
    thread_local const T* last = nullptr;
    if (last && same(*last, v)) return reinterpret_cast<uintptr_t>(last);
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    for (const T& x : p.values)
      if (same(x, v)) return reinterpret_cast<uintptr_t>(last = &x);
    if (p.values.size() < kMaxValues) return reinterpret_cast<uintptr_t>(last = &p.values.emplace_back(v));
    return reinterpret_cast<uintptr_t>(new T(v)) | 1;
  }
  void release() noexcept {
    if (bits_ & 1) delete reinterpret_cast<T*>(bits_ & ~uintptr_t{1});
    bits_ = 0;
  }
  uintptr_t bits_ = 0;
};

}  // namespace driftscope::detail
