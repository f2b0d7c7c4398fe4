// A TOML subset for policy and mapping files, parsed into nlohmann::json so that the TOML and the
// JSON spelling of a file go through one validator. Supported (docs/compare.md "Policy file"):
// comments, [table] and [[array-of-tables]] headers (dotted), bare/quoted/dotted keys, basic and
// literal strings, integers (decimal, 0x/0o/0b, '_' separators), floats (incl. inf/nan), booleans,
// arrays (multi-line, trailing comma) and inline tables. Not supported, and rejected by name:
// multi-line strings and dates. Every error names the origin and the line.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "driftscope/file.hpp"

#include "common/bytes.hpp"
#include "compare/internal.hpp"

namespace driftscope::compare_detail {
namespace {

using nlohmann::json;

class TomlParser {
 public:
  TomlParser(std::string_view text, std::string_view origin) : s_(text), origin_(origin) {}

  Result<json> run() {
    json root = json::object();
    json* current = &root;
    while (true) {
      skip_ws_comments_newlines();
      if (eof()) break;
      if (peek() == '[') {
        bool array = pos_ + 1 < s_.size() && s_[pos_ + 1] == '[';
        pos_ += array ? 2 : 1;
        std::vector<std::string> path;
        if (!parse_key_path(path)) return error_;
        skip_ws();
        if (!expect(']')) return error_;
        if (array && !expect(']')) return error_;
        if (!end_of_line()) return error_;
        json* node = &root;
        for (size_t i = 0; i < path.size(); ++i) {
          json& child = (*node)[path[i]];
          bool last = i + 1 == path.size();
          if (last && array) {
            if (child.is_null()) child = json::array();
            if (!child.is_array()) return fail(fmt::format("'{}' is not an array of tables", path[i]));
            child.push_back(json::object());
            node = &child.back();
          } else {
            if (child.is_null()) child = json::object();
            if (child.is_array() && !child.empty() && child.back().is_object()) {
              node = &child.back();  // [[a]] then [a.b]: b belongs to the last a
              continue;
            }
            if (!child.is_object()) return fail(fmt::format("'{}' is not a table", path[i]));
            node = &child;
          }
        }
        current = node;
        continue;
      }
      if (!parse_assignment(*current)) return error_;
      if (!end_of_line()) return error_;
    }
    return root;
  }

 private:
  std::string_view s_;
  std::string_view origin_;
  size_t pos_ = 0;
  size_t line_ = 1;
  Error error_;

  bool eof() const { return pos_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[pos_]; }

  bool set_error(std::string msg) {
    error_ = make_error(Errc::bad_policy, fmt::format("{}:{}: {}", origin_, line_, msg));
    return false;
  }
  Error fail(std::string msg) {
    set_error(std::move(msg));
    return error_;
  }
  // Messages stay one line: control characters are shown escaped.
  static std::string shown(char c) {
    if (c == '\n') return "end of line";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c));
    return fmt::format("'{}'", c);
  }
  bool expect(char c) {
    if (peek() != c) {
      return set_error(eof() ? fmt::format("expected '{}' before the end of the file", c)
                             : fmt::format("expected '{}', found {}", c, shown(peek())));
    }
    ++pos_;
    return true;
  }
  void skip_ws() {
    while (!eof() && (peek() == ' ' || peek() == '\t')) ++pos_;
  }
  void skip_comment() {
    if (peek() == '#')
      while (!eof() && peek() != '\n') ++pos_;
  }
  void skip_ws_comments_newlines() {
    while (!eof()) {
      skip_ws();
      skip_comment();
      if (peek() == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') ++pos_;
      if (peek() == '\n') {
        ++pos_;
        ++line_;
        continue;
      }
      break;
    }
  }
  bool end_of_line() {
    skip_ws();
    skip_comment();
    if (peek() == '\r') ++pos_;
    if (eof()) return true;
    if (peek() != '\n') return set_error(fmt::format("unexpected {} after a value", shown(peek())));
    return true;
  }

  static bool bare_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  }

  bool parse_simple_key(std::string& out) {
    skip_ws();
    if (peek() == '"') return parse_basic_string(out);
    if (peek() == '\'') return parse_literal_string(out);
    size_t start = pos_;
    while (!eof() && bare_char(peek())) ++pos_;
    if (pos_ == start) return set_error(eof() ? "expected a key" : fmt::format("expected a key, found {}", shown(peek())));
    out.assign(s_.substr(start, pos_ - start));
    return true;
  }
  bool parse_key_path(std::vector<std::string>& path) {
    while (true) {
      std::string k;
      if (!parse_simple_key(k)) return false;
      path.push_back(std::move(k));
      skip_ws();
      if (peek() != '.') return true;
      ++pos_;
    }
  }

  bool parse_assignment(json& table) {
    std::vector<std::string> path;
    if (!parse_key_path(path)) return false;
    skip_ws();
    if (!expect('=')) return false;
    skip_ws();
    json value;
    if (!parse_value(value)) return false;
    json* node = &table;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      json& child = (*node)[path[i]];
      if (child.is_null()) child = json::object();
      if (!child.is_object()) return set_error(fmt::format("'{}' is not a table", path[i]));
      node = &child;
    }
    if (node->contains(path.back()))
      return set_error(fmt::format("key '{}' is defined twice", path.back()));
    (*node)[path.back()] = std::move(value);
    return true;
  }

  bool parse_basic_string(std::string& out) {
    if (s_.substr(pos_, 3) == "\"\"\"") return set_error("multi-line strings are not supported");
    ++pos_;
    out.clear();
    while (true) {
      if (eof() || peek() == '\n') return set_error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (eof()) return set_error("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u':
        case 'U': {
          size_t n = e == 'u' ? 4 : 8;
          if (pos_ + n > s_.size()) return set_error("truncated \\u escape");
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            char h = s_[pos_ + i];
            uint32_t d;
            if (h >= '0' && h <= '9') d = static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f') d = static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') d = static_cast<uint32_t>(h - 'A' + 10);
            else return set_error("bad hex digit in \\u escape");
            cp = cp * 16 + d;
          }
          pos_ += n;
          if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return set_error(fmt::format("\\u escape U+{:X} is not a Unicode scalar value", cp));
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: return set_error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    if (!detail::valid_utf8(out)) return set_error("string is not valid UTF-8");
    return true;
  }
  bool parse_literal_string(std::string& out) {
    if (s_.substr(pos_, 3) == "'''") return set_error("multi-line strings are not supported");
    ++pos_;
    size_t start = pos_;
    while (!eof() && peek() != '\'' && peek() != '\n') ++pos_;
    if (peek() != '\'') return set_error("unterminated string");
    out.assign(s_.substr(start, pos_ - start));
    ++pos_;
    if (!detail::valid_utf8(out)) return set_error("string is not valid UTF-8");
    return true;
  }

  bool parse_number_or_keyword(json& out) {
    size_t start = pos_;
    while (!eof() && (bare_char(peek()) || peek() == '.' || peek() == '+' || peek() == ':')) ++pos_;
    std::string tok(s_.substr(start, pos_ - start));
    if (tok.empty()) return set_error(eof() ? "expected a value" : fmt::format("expected a value, found {}", shown(peek())));
    if (tok == "true") return out = true, true;
    if (tok == "false") return out = false, true;
    std::string body = tok;
    bool neg = false;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      neg = body[0] == '-';
      body.erase(0, 1);
    }
    if (body == "inf") return out = neg ? -HUGE_VAL : HUGE_VAL, true;
    if (body == "nan") return out = std::nan(""), true;
    if (tok.find(':') != std::string::npos || (tok.size() >= 10 && tok[4] == '-' && tok[7] == '-'))
      return set_error(fmt::format("dates and times are not supported ('{}')", tok));
    std::string clean;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '_') {
        if (i == 0 || i + 1 == body.size() || body[i - 1] == '_')
          return set_error(fmt::format("misplaced '_' in number '{}'", tok));
        continue;
      }
      clean += body[i];
    }
    int base = 10;
    if (clean.size() > 2 && clean[0] == '0' && (clean[1] == 'x' || clean[1] == 'o' || clean[1] == 'b')) {
      base = clean[1] == 'x' ? 16 : clean[1] == 'o' ? 8 : 2;
      clean.erase(0, 2);
    }
    bool is_float = base == 10 && clean.find_first_of(".eE") != std::string::npos;
    errno = 0;
    char* end = nullptr;
    if (is_float) {
      double v = std::strtod(clean.c_str(), &end);
      if (clean.empty() || *end != '\0' || clean.front() == '.' || clean.back() == '.')
        return set_error(fmt::format("'{}' is not a number", tok));
      return out = neg ? -v : v, true;
    }
    if (clean.empty() || clean[0] == '-' || clean[0] == '+')
      return set_error(fmt::format("'{}' is not a number", tok));
    unsigned long long v = std::strtoull(clean.c_str(), &end, base);
    if (*end != '\0') return set_error(fmt::format("'{}' is not a value (strings need quotes)", tok));
    if (errno == ERANGE || v > (neg ? 0x8000000000000000ull : 0x7fffffffffffffffull))
      return set_error(fmt::format("integer '{}' is out of range", tok));
    if (neg) out = v == 0x8000000000000000ull ? INT64_MIN : -static_cast<int64_t>(v);
    else out = static_cast<int64_t>(v);
    return true;
  }

  bool skip_array_space() {
    while (!eof()) {
      skip_ws();
      skip_comment();
      if (peek() == '\r') { ++pos_; continue; }
      if (peek() == '\n') {
        ++pos_;
        ++line_;
        continue;
      }
      break;
    }
    return true;
  }

  bool parse_value(json& out, int depth = 0) {
    if (depth > 32) return set_error("values nested too deeply");
    char c = peek();
    if (c == '"' || c == '\'') {
      std::string str;
      if (!(c == '"' ? parse_basic_string(str) : parse_literal_string(str))) return false;
      out = std::move(str);
      return true;
    }
    if (c == '[') {
      ++pos_;
      out = json::array();
      while (true) {
        skip_array_space();
        if (peek() == ']') {
          ++pos_;
          return true;
        }
        json item;
        if (!parse_value(item, depth + 1)) return false;
        out.push_back(std::move(item));
        skip_array_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        return expect(']');
      }
    }
    if (c == '{') {
      ++pos_;
      out = json::object();
      skip_ws();
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      while (true) {
        if (!parse_assignment(out)) return false;
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          skip_ws();
          continue;
        }
        return expect('}');
      }
    }
    return parse_number_or_keyword(out);
  }
};

}  // namespace

Result<nlohmann::json> parse_toml(std::string_view text, std::string_view origin) {
  return TomlParser(text, origin).run();
}

Result<nlohmann::json> parse_config(std::string_view text, std::string_view origin) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  if (i < text.size() && text[i] == '{') {
    auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      return make_error(Errc::bad_policy, fmt::format("{}: not valid JSON", origin));
    return j;
  }
  return parse_toml(text, origin);  // whole text: line numbers in errors stay right
}

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  // Regular files only (a FIFO given as --policy would block forever): driftscope/file.hpp.
  return read_small_file(path, static_cast<size_t>(max_bytes));
}

}  // namespace driftscope::compare_detail
