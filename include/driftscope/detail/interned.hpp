// driftscope — Interned: an immutable string of few distinct values (an op type, where a pair's
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
// criteria came from), held as one pointer.
//
// A report of a million pairs holds each of these once or twice per pair: as std::string they
// cost 32 bytes each, as Interned 8 (issue 13 §5). Equal values share one copy in a process-wide
// pool that only grows; so that text from a file cannot grow it without bound, a value longer
// than kMaxLength, or any value once the pool holds kMaxValues, gets a copy of its own instead
// (same behaviour, only larger). Reading needs no lock; making one locks the pool unless the
// thread made the same value last. It converts to `const std::string&` and std::string_view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "driftscope/api.h"

namespace driftscope::detail {

class DS_API Interned {
 public:
  static constexpr size_t kMaxLength = 256;
  static constexpr size_t kMaxValues = 4096;

  Interned() noexcept = default;
  Interned(std::string_view s);
  Interned(const std::string& s) : Interned(std::string_view(s)) {}
  Interned(const char* s) : Interned(std::string_view(s)) {}
  Interned(const Interned& o);
  Interned(Interned&& o) noexcept : bits_(o.bits_) { o.bits_ = 0; }
  ~Interned() { release(); }
  Interned& operator=(const Interned& o);
  Interned& operator=(Interned&& o) noexcept;
  Interned& operator=(std::string_view s) { return *this = Interned(s); }
  Interned& operator=(const std::string& s) { return *this = Interned(s); }
  Interned& operator=(const char* s) { return *this = Interned(s); }
  Interned& operator+=(std::string_view s);

  const std::string& get() const noexcept {
    return bits_ ? *reinterpret_cast<const std::string*>(bits_ & ~uintptr_t{1}) : empty_string();
  }
  operator const std::string&() const noexcept { return get(); }
  operator std::string_view() const noexcept { return get(); }
  size_t size() const noexcept { return get().size(); }
  bool empty() const noexcept { return get().empty(); }
  const char* c_str() const noexcept { return get().c_str(); }
  const char* data() const noexcept { return get().data(); }

  friend bool operator==(const Interned& a, const Interned& b) noexcept { return a.get() == b.get(); }
  friend bool operator==(const Interned& a, std::string_view b) noexcept { return std::string_view(a.get()) == b; }
  friend bool operator==(const Interned& a, const std::string& b) noexcept { return a.get() == b; }
  friend bool operator==(const Interned& a, const char* b) noexcept { return a.get() == b; }
  // Concatenation gives a std::string, as std::string's does.
  friend std::string operator+(const Interned& a, std::string_view b) { return std::string(a.get()).append(b); }
  friend std::string operator+(std::string_view a, const Interned& b) { return std::string(a).append(b.get()); }

 private:
  static const std::string& empty_string() noexcept;
  void release() noexcept;
  // 0: empty; else the address of the string, with bit 0 set when this object owns it.
  uintptr_t bits_ = 0;
};

}  // namespace driftscope::detail
