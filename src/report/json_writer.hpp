// A streaming JSON writer that produces byte for byte what nlohmann::json::dump(indent) gives for
// the same document (indent < 0: compact), without building the document: the report's per-pair
// objects were ~70 small nodes each, and building, dumping and re-indenting them cost 44 us a pair
// (4.4 s per 100,000 pairs, issue 13 §5). Numbers use nlohmann's float formatting (Grisu2,
// to_chars, as json_double.hpp reimplements it faster), so doubles print exactly as before;
// strings that need escaping go through nlohmann.
// At 1,000,000 pairs (2.75 GB of text) every byte counts: appends are inlined into a JsonBuffer
// (std::string's push_back and append are out-of-line calls) and strings are checked for escapes
// eight bytes at a time. The pieces of fixed most length (a member's separator, indentation and
// literal key; a number's digits) are copied whole into room reserved past the end and the end
// then moved by their true length: one fixed-size copy the compiler inlines, where a copy of the
// exact length was a call to memcpy (the writer's bookkeeping was half of formatting a pair).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/json_double.hpp"

namespace driftscope::compare_detail {

#define DS_JSON_INLINE [[gnu::always_inline]] inline

// A growable run of bytes with inlined appends; never empty of storage (no null pointer to copy to).
class JsonBuffer {
 public:
  JsonBuffer() { grow(0); }
  JsonBuffer(JsonBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), end_(std::exchange(o.end_, nullptr)),
        cap_(std::exchange(o.cap_, nullptr)) {}
  JsonBuffer& operator=(JsonBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(end_, o.end_);
    std::swap(cap_, o.cap_);
    return *this;
  }
  JsonBuffer(const JsonBuffer&) = delete;
  JsonBuffer& operator=(const JsonBuffer&) = delete;
  ~JsonBuffer() { std::free(data_); }

  size_t size() const { return static_cast<size_t>(end_ - data_); }
  std::string_view view() const { return {data_, size()}; }
  void clear() { end_ = data_; }
  void reserve(size_t n) {
    if (static_cast<size_t>(cap_ - data_) < n) grow(n - size());
  }
  DS_JSON_INLINE void push(char c) {
    if (end_ == cap_) grow(1);
    *end_++ = c;
  }
  DS_JSON_INLINE void append(const char* s, size_t n) {
    if (static_cast<size_t>(cap_ - end_) < n) grow(n);
    std::memcpy(end_, s, n);
    end_ += n;
  }
  DS_JSON_INLINE void append(std::string_view s) { append(s.data(), s.size()); }
  DS_JSON_INLINE void fill(char c, size_t n) {
    if (static_cast<size_t>(cap_ - end_) < n) grow(n);
    std::memset(end_, c, n);
    end_ += n;
  }
  // Room for n more bytes at the returned pointer; what is written there counts once end() is
  // moved past it (bytes written beyond are scratch).
  DS_JSON_INLINE char* room(size_t n) {
    if (static_cast<size_t>(cap_ - end_) < n) grow(n);
    return end_;
  }
  DS_JSON_INLINE void set_end(char* p) { end_ = p; }
  JsonBuffer& operator+=(char c) {
    push(c);
    return *this;
  }
  JsonBuffer& operator+=(std::string_view s) {
    append(s);
    return *this;
  }

 private:
  [[gnu::noinline]] void grow(size_t need) {
    const size_t size = this->size();
    const size_t cap = std::max({static_cast<size_t>(cap_ - data_) * 2, size + need, size_t{256}});
    char* p = static_cast<char*>(std::realloc(data_, cap));
    if (!p) throw std::bad_alloc();
    data_ = p;
    end_ = p + size;
    cap_ = p + cap;
  }

  char* data_ = nullptr;
  char* end_ = nullptr;
  char* cap_ = nullptr;
};

// The inputs of a run of members (JsonWriter::run): values as their bytes, strings and arrays
// with their length first, so two keys compare equal only when every input is the same. A key
// that outgrows its buffer is marked unusable and the run is written afresh.
class RunKey {
 public:
  template <class T>
  DS_JSON_INLINE RunKey& add(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
    return *this;
  }
  DS_JSON_INLINE RunKey& str(std::string_view s) {
    add(s.size());
    bytes(s.data(), s.size());
    return *this;
  }
  template <class Range>
  RunKey& strings(const Range& v) {
    add(v.size());
    for (const auto& x : v) str(x);
    return *this;
  }
  template <class T>
  DS_JSON_INLINE RunKey& span(std::span<const T> v) {
    add(v.size());
    bytes(v.data(), v.size() * sizeof(T));
    return *this;
  }
  void fail() { n_ = sizeof buf_ + 1; }
  bool ok() const { return n_ <= sizeof buf_; }
  std::string_view view() const { return {buf_, n_}; }

 private:
  DS_JSON_INLINE void bytes(const void* p, size_t n) {
    if (n == 0) return;  // (an empty span's or string's data() may be null: no memcpy from it)
    if (n > sizeof buf_ - std::min(n_, sizeof buf_)) return fail();
    std::memcpy(buf_ + n_, p, n);
    n_ += n;
  }
  char buf_[240];
  size_t n_ = 0;
};

// The last text of one run of members and the key it was written for (one per run and thread).
struct RunText {
  std::string key;
  std::string text;
  int depth = -1;
  int indent = 0;
};

class JsonWriter {
 public:
  // Appends to `out`; the first value is written at `depth` (its closing bracket is indented so).
  JsonWriter(JsonBuffer& out, int indent, int depth) : out_(out), indent_(indent), depth_(depth) {}

  void begin_object() { open('{'); }
  void end_object() { close('{', '}'); }
  void begin_array() { open('['); }
  void end_array() { close('[', ']'); }
  // The key of the next member of the innermost object.
  void key(std::string_view k) {
    item_prefix();
    string(k);
    key_end();
  }
  // A key written in the source (a string literal): plain ASCII by construction, not checked.
  template <size_t N>
  DS_JSON_INLINE void key(const char (&k)[N]) {
    item_prefix();
    char* p = out_.room(N + 3);
    p[0] = '"';
    std::memcpy(p + 1, k, N - 1);
    p[N] = '"';
    p[N + 1] = ':';
    p[N + 2] = ' ';
    out_.set_end(p + N + (indent_ >= 0 ? 3 : 2));
    after_key_ = true;
  }

  DS_JSON_INLINE void null() {
    prefix();
    char* p = out_.room(4);
    std::memcpy(p, "null", 4);
    out_.set_end(p + 4);
  }
  DS_JSON_INLINE void boolean(bool b) {
    prefix();
    char* p = out_.room(5);
    std::memcpy(p, b ? "true " : "false", 5);
    out_.set_end(p + (b ? 4 : 5));
  }
  DS_JSON_INLINE void number(uint64_t v) { prefix(); append_uint(v); }
  void number(int64_t v) {
    prefix();
    if (v < 0) {
      out_ += '-';
      append_uint(~static_cast<uint64_t>(v) + 1);
    } else {
      append_uint(static_cast<uint64_t>(v));
    }
  }
  DS_JSON_INLINE void number(uint32_t v) { number(static_cast<uint64_t>(v)); }
  DS_JSON_INLINE void number(int v) { number(static_cast<int64_t>(v)); }
  DS_JSON_INLINE void number(uint16_t v) { number(static_cast<uint64_t>(v)); }
  // A double as nlohmann dumps it (non-finite: null, as nlohmann does).
  void number(double v) {
    prefix();
    if (!std::isfinite(v)) {
      out_.append("null", 4);
      return;
    }
    // A report repeats many doubles (a pair's error is its relative L2 and the next pair's input
    // error; the rounding bound and the criteria are the same for every pair of a dtype), and
    // Grisu2 was 40% of formatting a pair: the last texts are kept, per thread, by their bits.
    struct Cached {
      uint64_t bits = 0;
      uint8_t len = 0;  // 0: empty
      char text[31];
    };
    thread_local Cached cache[256];
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    Cached& c = cache[(bits * 0x9e3779b97f4a7c15ULL) >> 56];
    if (c.len == 0 || c.bits != bits) [[unlikely]] {
      char* end = json_double(c.text, v);
      c.len = static_cast<uint8_t>(end - c.text);
      c.bits = bits;
    }
    char* p = out_.room(sizeof c.text);
    std::memcpy(p, c.text, sizeof c.text);
    out_.set_end(p + c.len);
  }
  DS_JSON_INLINE void str(std::string_view s) {
    prefix();
    string(s);
  }
  // A value rendered by nlohmann (for rare, irregular members), re-indented to this depth.
  void json(const nlohmann::ordered_json& v) {
    prefix();
    std::string s = v.dump(indent_, ' ', false, nlohmann::detail::error_handler_t::replace);
    if (indent_ <= 0) {
      out_ += std::string_view(s);
      return;
    }
    const size_t pad = static_cast<size_t>(depth_) * static_cast<size_t>(indent_);
    size_t from = 0;
    for (size_t nl; (nl = s.find('\n', from)) != std::string::npos; from = nl + 1) {
      out_.append(s.data() + from, nl + 1 - from);
      spaces(pad);
    }
    out_.append(std::string_view(s).substr(from));
  }

  // Members written by fn (whose text is a function of `key` alone), or, when `last` holds the
  // text fn wrote for the same key at the same depth, that text copied whole: a report repeats
  // long runs of members from pair to pair (nulls, zero counts, one dtype, one criteria), and
  // writing them member by member was most of formatting a pair. Only after an object's first
  // member, where the separator before the run is always ",".
  template <class Fn>
  DS_JSON_INLINE void run(RunText& last, const RunKey& key, Fn&& fn) {
    if (!key.ok() || after_key_ || open_.empty() || open_.back() != 0) [[unlikely]] {
      fn();
      return;
    }
    if (last.depth == depth_ && last.indent == indent_ && std::string_view(last.key) == key.view()) {
      out_.append(last.text);
      return;
    }
    const size_t from = out_.size();
    fn();
    last.text.assign(out_.view().substr(from));
    last.key.assign(key.view());
    last.depth = depth_;
    last.indent = indent_;
  }

  // A std::vector or std::span of strings or integers.
  template <class Range>
  void array_of(const Range& v) {
    using T = typename Range::value_type;
    begin_array();
    for (const auto& x : v) {
      if constexpr (std::is_same_v<T, std::string>) str(x);
      else number(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x));
    }
    end_array();
  }

 private:
  DS_JSON_INLINE void key_end() {
    if (indent_ >= 0) out_.append(": ", 2);
    else out_ += ':';
    after_key_ = true;
  }
  // Decimal digits, written into the 20 bytes a uint64_t may need: its digit count first, then
  // the digits from the last one back.
  DS_JSON_INLINE void append_uint(uint64_t v) {
    char* p = out_.room(20);
    if (v < 10) {
      *p = static_cast<char>('0' + v);
      out_.set_end(p + 1);
      return;
    }
    size_t n = 2;
    for (uint64_t t = v / 100; t; t /= 10) ++n;
    char* q = p + n;
    out_.set_end(q);
    do {
      *--q = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
  }
  void spaces(size_t n) { out_.fill(' ', n); }
  // Before a value: an array element starts its line; a member's value follows its key.
  DS_JSON_INLINE void prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!open_.empty()) item_prefix();
  }
  // The separator before an element: the container's opening bracket for its first element
  // (an empty container is written "{}" / "[]" by close()), a comma after that; then its line.
  DS_JSON_INLINE void item_prefix() {
    // ",\n" and the indentation in one fixed-size copy where it fits (every report nests this
    // shallow); the first element of a container replaces the comma with its opening bracket.
    static constexpr char kSep[64] = ",\n                                                             ";
    char& pending = open_.back();
    const size_t pad = indent_ > 0 ? static_cast<size_t>(depth_) * static_cast<size_t>(indent_) : 0;
    if (indent_ < 0 || pad + 2 >= sizeof kSep) [[unlikely]] {
      if (pending) out_ += pending;
      else out_ += ',';
      pending = 0;
      if (indent_ >= 0) {
        out_ += '\n';
        spaces(pad);
      }
      return;
    }
    char* p = out_.room(sizeof kSep);
    std::memcpy(p, kSep, sizeof kSep);
    if (pending) {
      p[0] = pending;
      pending = 0;
    }
    out_.set_end(p + pad + 2);
  }
  DS_JSON_INLINE void open(char c) {
    prefix();
    open_.push_back(c);
    ++depth_;
  }
  void close(char o, char c) {
    --depth_;
    const bool empty = open_.back() != 0;
    open_.pop_back();
    if (empty) {
      out_ += o;
      out_ += c;
      return;
    }
    if (indent_ >= 0) {
      out_ += '\n';
      spaces(static_cast<size_t>(depth_) * static_cast<size_t>(indent_ > 0 ? indent_ : 0));
    }
    out_ += c;
  }
  // nlohmann escapes '"', '\\' and control characters and replaces invalid UTF-8; plain
  // printable ASCII (every name a model produces, nearly) is copied as is.
  DS_JSON_INLINE void string(std::string_view s) {
    if (plain(s)) [[likely]] {
      char* p = out_.room(s.size() + 2);
      *p = '"';
      std::memcpy(p + 1, s.data(), s.size());
      p[s.size() + 1] = '"';
      out_.set_end(p + s.size() + 2);
      return;
    }
    out_ += std::string_view(nlohmann::ordered_json(std::string(s)).dump(
        -1, ' ', false, nlohmann::detail::error_handler_t::replace));
  }
  // No byte below 0x20 or from 0x80 up, no '"' and no '\\' (eight at a time: a byte b has the
  // high bit of b - k set and b's own clear exactly when b < k, for b < 0x80).
  DS_JSON_INLINE static bool plain(std::string_view s) {
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    auto has_zero = [](uint64_t v) { return ((v - kOnes) & ~v & kHigh) != 0; };
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & kHigh) || ((w - 0x20 * kOnes) & ~w & kHigh) || has_zero(w ^ ('"' * kOnes)) ||
          has_zero(w ^ ('\\' * kOnes)))
        return false;
    }
    for (; i < s.size(); ++i) {
      const auto u = static_cast<unsigned char>(s[i]);
      if (u < 0x20 || u >= 0x80 || u == '"' || u == '\\') return false;
    }
    return true;
  }

  JsonBuffer& out_;
  int indent_;
  int depth_;
  bool after_key_ = false;
  // Per open container: its opening bracket while no element is written yet, then 0. A string
  // so that the few levels of a report need no allocation (short-string buffer).
  std::string open_;
};

#undef DS_JSON_INLINE

}  // namespace driftscope::compare_detail
