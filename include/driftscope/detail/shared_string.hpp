// driftscope — SharedString: an immutable string whose copies share one heap block.
//
// Not API: include/driftscope/detail/ holds the storage that the public classes keep in private
// members (HACKING.md "Public API"); read them through their accessors. It may change at any time.
//
// For a pair's two names (TensorDesc::name): the reference's and the candidate's tensor almost
// always have the same name, and a report of a million pairs held them as two std::string of 32
// bytes each plus, past 15 characters, two heap blocks. A SharedString is one pointer, and a copy
// shares its block (reference-counted, thread-safe): with glibc's allocator a pair of equal names
// takes 48 to 96 bytes less for names of 16 to 39 characters (96 for the 26 of the benchmark's
// "model.layers.0.block.0.out"), 16 less for shorter ones (issue 13 §5). Every non-empty value
// has a block: the size and the characters, NUL-terminated.
//
// It reads as a std::string_view (it converts to one implicitly, and compares and orders like
// one); a std::string is made with str() or an explicit conversion, so no copy is made unseen.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "driftscope/api.h"

namespace driftscope::detail {

class DS_API SharedString {
 public:
  SharedString() noexcept = default;
  SharedString(std::string_view s);
  SharedString(const std::string& s) : SharedString(std::string_view(s)) {}
  SharedString(const char* s) : SharedString(std::string_view(s)) {}
  SharedString(const SharedString& o) noexcept : block_(o.block_) { retain(); }
  SharedString(SharedString&& o) noexcept : block_(o.block_) { o.block_ = nullptr; }
  ~SharedString() { release(); }
  SharedString& operator=(const SharedString& o) noexcept;
  SharedString& operator=(SharedString&& o) noexcept;
  SharedString& operator=(std::string_view s) { return *this = SharedString(s); }
  SharedString& operator=(const std::string& s) { return *this = SharedString(s); }
  SharedString& operator=(const char* s) { return *this = SharedString(s); }

  std::string_view view() const noexcept { return block_ ? std::string_view(chars(), size()) : std::string_view(); }
  operator std::string_view() const noexcept { return view(); }
  explicit operator std::string() const { return std::string(view()); }
  std::string str() const { return std::string(view()); }
  size_t size() const noexcept { return block_ ? block_->size : 0; }
  size_t length() const noexcept { return size(); }
  bool empty() const noexcept { return size() == 0; }
  const char* data() const noexcept { return block_ ? chars() : ""; }
  const char* c_str() const noexcept { return data(); }
  const char* begin() const noexcept { return data(); }
  const char* end() const noexcept { return data() + size(); }
  char operator[](size_t i) const noexcept { return data()[i]; }
  bool starts_with(std::string_view p) const noexcept { return view().starts_with(p); }
  bool ends_with(std::string_view p) const noexcept { return view().ends_with(p); }
  size_t find(std::string_view s, size_t pos = 0) const noexcept { return view().find(s, pos); }
  size_t find(char c, size_t pos = 0) const noexcept { return view().find(c, pos); }
  size_t rfind(char c, size_t pos = std::string_view::npos) const noexcept { return view().rfind(c, pos); }
  std::string_view substr(size_t pos, size_t n = std::string_view::npos) const { return view().substr(pos, n); }
  // Copies that share this one's block (for tests and for callers that want to know).
  bool shares_with(const SharedString& o) const noexcept { return block_ && block_ == o.block_; }

  friend bool operator==(const SharedString& a, const SharedString& b) noexcept {
    return a.block_ == b.block_ || a.view() == b.view();
  }
  friend bool operator==(const SharedString& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator==(const SharedString& a, const std::string& b) noexcept { return a.view() == b; }
  friend bool operator==(const SharedString& a, const char* b) noexcept { return a.view() == b; }
  friend std::strong_ordering operator<=>(const SharedString& a, const SharedString& b) noexcept {
    return a.view() <=> b.view();
  }
  friend std::strong_ordering operator<=>(const SharedString& a, std::string_view b) noexcept {
    return a.view() <=> b;
  }
  // Concatenation gives a std::string, as std::string's does.
  friend std::string operator+(const SharedString& a, std::string_view b) { return std::string(a.view()).append(b); }
  friend std::string operator+(std::string_view a, const SharedString& b) { return std::string(a).append(b.view()); }
  friend std::string operator+(const std::string& a, const SharedString& b) { return std::string(a).append(b.view()); }
  friend std::string operator+(const char* a, const SharedString& b) { return std::string(a).append(b.view()); }
  friend DS_API std::ostream& operator<<(std::ostream& os, const SharedString& s);

 private:
  struct Block;
  const char* chars() const noexcept;
  void retain() const noexcept;
  void release() noexcept;
  Block* block_ = nullptr;  // null: the empty string
  struct Block {
    uint32_t refs;  // (atomic_ref in shared_string.cpp)
    uint32_t size;
  };
};

// fmt formats it as its text: fmt 9 through the std::string_view conversion, fmt 10 and later
// through format_as.
inline std::string_view format_as(const SharedString& s) noexcept { return s.view(); }

}  // namespace driftscope::detail

template <>
struct std::hash<driftscope::detail::SharedString> {
  size_t operator()(const driftscope::detail::SharedString& s) const noexcept { return std::hash<std::string_view>()(s.view()); }
};
