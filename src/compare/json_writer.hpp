// A streaming JSON writer that produces byte for byte what nlohmann::json::dump(indent) gives for
// the same document (indent < 0: compact), without building the document: the report's per-pair
// objects were ~70 small nodes each, and building, dumping and re-indenting them cost 44 us a pair
// (4.4 s per 100,000 pairs, issue 13 §5). Numbers use nlohmann's own float formatting (Grisu2,
// to_chars), so doubles print exactly as before; strings that need escaping go through nlohmann.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace driftscope::compare_detail {

class JsonWriter {
 public:
  // Appends to `out`; the first value is written at `depth` (its closing bracket is indented so).
  JsonWriter(std::string& out, int indent, int depth) : out_(out), indent_(indent), depth_(depth) {}

  void begin_object() { open('{'); }
  void end_object() { close('{', '}'); }
  void begin_array() { open('['); }
  void end_array() { close('[', ']'); }
  // The key of the next member of the innermost object.
  void key(std::string_view k) {
    item_prefix();
    string(k);
    if (indent_ >= 0) out_.append(": ", 2);
    else out_ += ':';
    after_key_ = true;
  }

  void null() { scalar("null"); }
  void boolean(bool b) { scalar(b ? "true" : "false"); }
  void number(uint64_t v) { prefix(); append_uint(v); }
  void number(int64_t v) {
    prefix();
    if (v < 0) {
      out_ += '-';
      append_uint(~static_cast<uint64_t>(v) + 1);
    } else {
      append_uint(static_cast<uint64_t>(v));
    }
  }
  void number(uint32_t v) { number(static_cast<uint64_t>(v)); }
  void number(int v) { number(static_cast<int64_t>(v)); }
  void number(uint16_t v) { number(static_cast<uint64_t>(v)); }
  // A double as nlohmann dumps it (non-finite: null, as nlohmann does).
  void number(double v) {
    prefix();
    if (!std::isfinite(v)) {
      out_.append("null", 4);
      return;
    }
    char buf[64];
    char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, static_cast<size_t>(end - buf));
  }
  void str(std::string_view s) {
    prefix();
    string(s);
  }
  // A value rendered by nlohmann (for rare, irregular members), re-indented to this depth.
  void json(const nlohmann::ordered_json& v) {
    prefix();
    std::string s = v.dump(indent_, ' ', false, nlohmann::detail::error_handler_t::replace);
    if (indent_ <= 0) {
      out_ += s;
      return;
    }
    const size_t pad = static_cast<size_t>(depth_) * static_cast<size_t>(indent_);
    size_t from = 0;
    for (size_t nl; (nl = s.find('\n', from)) != std::string::npos; from = nl + 1) {
      out_.append(s, from, nl + 1 - from);
      spaces(pad);
    }
    out_.append(s, from, std::string::npos);
  }

  template <class T>
  void array_of(const std::vector<T>& v) {
    begin_array();
    for (const auto& x : v) {
      if constexpr (std::is_same_v<T, std::string>) str(x);
      else number(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x));
    }
    end_array();
  }

 private:
  void scalar(std::string_view s) {
    prefix();
    out_.append(s.data(), s.size());
  }
  void append_uint(uint64_t v) {
    if (v < 10) {
      out_ += static_cast<char>('0' + v);
      return;
    }
    char buf[24];
    char* p = buf + sizeof buf;
    do {
      *--p = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    out_.append(p, static_cast<size_t>(buf + sizeof buf - p));
  }
  // n spaces in one append (a report nests a few levels deep; deeper pads take several).
  void spaces(size_t n) {
    static constexpr char kSpaces[] = "                                                                ";
    constexpr size_t kMax = sizeof kSpaces - 1;
    for (; n > kMax; n -= kMax) out_.append(kSpaces, kMax);
    out_.append(kSpaces, n);
  }
  // Before a value: an array element starts its line; a member's value follows its key.
  void prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!open_.empty()) item_prefix();
  }
  // The separator before an element: the container's opening bracket for its first element
  // (an empty container is written "{}" / "[]" by close()), a comma after that; then its line.
  void item_prefix() {
    char& pending = open_.back();
    if (pending) {
      out_ += pending;
      pending = 0;
    } else {
      out_ += ',';
    }
    if (indent_ >= 0) {
      out_ += '\n';
      spaces(static_cast<size_t>(depth_) * static_cast<size_t>(indent_ > 0 ? indent_ : 0));
    }
  }
  void open(char c) {
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
  void string(std::string_view s) {
    bool plain = true;
    for (char ch : s) {
      const auto u = static_cast<unsigned char>(ch);
      if (u < 0x20 || u >= 0x80 || ch == '"' || ch == '\\') {
        plain = false;
        break;
      }
    }
    if (plain) {
      out_ += '"';
      out_.append(s.data(), s.size());
      out_ += '"';
      return;
    }
    out_ += nlohmann::ordered_json(std::string(s)).dump(-1, ' ', false,
                                                        nlohmann::detail::error_handler_t::replace);
  }

  std::string& out_;
  int indent_;
  int depth_;
  bool after_key_ = false;
  // Per open container: its opening bracket while no element is written yet, then 0. A string
  // so that the few levels of a report need no allocation (short-string buffer).
  std::string open_;
};

}  // namespace driftscope::compare_detail
