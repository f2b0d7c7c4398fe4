// Policy and mapping files: TOML (toml++) or JSON text into nlohmann::json, so that both spellings
// of a file go through one validator (policy.cpp). docs/compare.md "Policy file" describes the
// format: TOML 1.0 without multi-line strings and dates (refused by name, they mean nothing here).
//
// Hostile files: before any parser runs, one linear scan bounds how deeply values nest and how
// many parts a dotted key has (issue 7 bug 3: recursion depth was reset inside inline tables).
// The parsers are recursive, so the bound must hold before they start, not be detected by them.
// toml++ is compiled into this one translation unit (header-only, no exceptions), so its limits
// are ours and nothing of it can throw across the library API.
#include <cmath>
#include <fstream>
#include <new>

#include <fmt/format.h>

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
// toml++'s own guard (default 256) sits above ours: the pre-scan has already refused deeper text.
#define TOML_MAX_NESTED_VALUES 64
#include <toml++/toml.h>

#include "common/bytes.hpp"
#include "compare/internal.hpp"

namespace driftscope::compare_detail {
namespace {

using nlohmann::json;

// Arrays and inline tables (or JSON arrays and objects) inside one another, and the parts of one
// dotted key. A policy needs three levels; 32 leaves room for any real file while keeping every
// recursion (parsers, conversion, destruction) a few kilobytes deep even under ASan.
constexpr size_t kMaxNesting = 32;
constexpr size_t kMaxKeyParts = 32;
// Tables of the converted document inside one another: headers, dotted keys and inline tables
// together.
constexpr size_t kMaxDepth = 64;

Error config_error(std::string_view origin, uint64_t line, uint64_t column, std::string_view msg) {
  return make_error(Errc::bad_policy, fmt::format("{}:{}:{}: {}", origin, line, column, msg));
}

bool bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Line and column (1-based, columns in code points as toml++ counts them) of a byte offset.
struct Position {
  uint64_t line = 1, column = 1;
};
Position position_of(std::string_view text, size_t offset) {
  Position p;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++p.column;
    }
  }
  return p;
}

// The scan: strings and comments are skipped exactly as TOML (or JSON) lexes them, so brackets and
// dots inside them never count. For text that is not valid TOML the counts may be off, but only
// towards refusing earlier; the parser would refuse that text anyway.
Result<void> check_nesting(std::string_view s, std::string_view origin, bool is_json) {
  size_t depth = 0, dots = 0;
  bool after_part = false;  // the last token was a bare or quoted key part (a '.' continues it)
  bool line_start = true;   // only blanks since the last newline
  auto fail = [&](size_t at, std::string_view what) -> Error {
    Position p = position_of(s, at);
    return config_error(origin, p.line, p.column, what);
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"' || (c == '\'' && !is_json)) {
      const bool multi = !is_json && s.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
      const bool escapes = c == '"';
      i += multi ? 3 : 1;
      while (i < s.size()) {
        if (escapes && s[i] == '\\') {
          i += 2;
          continue;
        }
        if (!multi && s[i] == '\n' && !is_json) break;  // an unterminated string: resync
        if (multi ? s.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''") : s[i] == c) {
          if (multi) {
            i += 2;
            while (i + 1 < s.size() && s[i + 1] == c) ++i;  // up to two quotes end the content
          }
          break;
        }
        ++i;
      }
      after_part = true;
      line_start = false;
      continue;
    }
    if (c == '#' && !is_json) {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
      continue;
    }
    if (c == ' ' || c == '\t') continue;
    if (c == '[' && depth == 0 && line_start && !is_json) {
      // A table header. toml++ 3.3 asserts (assumes, under NDEBUG) that a header's key starts
      // with a key character or a quote; "[!x]" would break that assumption, so it stops here.
      size_t j = i + 1;
      if (j < s.size() && s[j] == '[') ++j;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j < s.size() && !bare_key_char(s[j]) && s[j] != '"' && s[j] != '\'' && s[j] != ']')
        return fail(j, "expected a key (bare, \"quoted\" or 'literal') in the table header");
    }
    line_start = c == '\n' || (c == '\r' && line_start);
    if (c == '.' && after_part && !is_json) {
      if (++dots >= kMaxKeyParts)
        return fail(i, fmt::format("a dotted key has more than {} parts", kMaxKeyParts));
      after_part = false;
      continue;
    }
    if (bare_key_char(c)) {
      after_part = true;
      continue;
    }
    after_part = false;
    dots = 0;
    if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return fail(i, fmt::format("values nested more than {} deep", kMaxNesting));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

class Converter {
 public:
  Converter(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  Result<json> convert(const toml::node& node, size_t depth) {
    if (depth > kMaxDepth) return error(node, fmt::format("tables nested more than {} deep", kMaxDepth));
    if (const auto* t = node.as_table()) {
      json out = json::object();
      for (const auto& [key, value] : *t) {
        auto v = convert(value, depth + 1);
        if (!v) return v;
        out[std::string(key.str())] = std::move(*v);
      }
      return out;
    }
    if (const auto* a = node.as_array()) {
      json out = json::array();
      for (const auto& value : *a) {
        auto v = convert(value, depth + 1);
        if (!v) return v;
        out.push_back(std::move(*v));
      }
      return out;
    }
    if (const auto* str = node.as_string()) {
      if (multi_line(node)) return error(node, "multi-line strings are not supported");
      return json(str->get());
    }
    if (const auto* i = node.as_integer()) return json(i->get());
    if (const auto* f = node.as_floating_point()) return json(f->get());
    if (const auto* b = node.as_boolean()) return json(b->get());
    return error(node, "dates and times are not supported");
  }

 private:
  std::string_view text_;
  std::string_view origin_;

  Error error(const toml::node& node, std::string_view msg) const {
    const auto& at = node.source().begin;
    return config_error(origin_, at.line, at.column, msg);
  }
  // toml++ does not say how a string was spelt; its first bytes in the text do.
  bool multi_line(const toml::node& node) const {
    const auto& at = node.source().begin;
    size_t i = 0;
    for (uint64_t line = 1; line < at.line && i < text_.size(); ++i)
      if (text_[i] == '\n') ++line;
    for (uint64_t col = 1; col < at.column && i < text_.size(); ++i)
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++col;
    while (i < text_.size() && (static_cast<unsigned char>(text_[i]) & 0xC0) == 0x80) ++i;
    std::string_view rest = text_.substr(std::min(i, text_.size()));
    return rest.starts_with("\"\"\"") || rest.starts_with("'''");
  }
};

// toml++ descriptions are one line; they may quote the offending text, so control characters are
// shown escaped to keep the message one printable line.
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

}  // namespace

Result<nlohmann::json> parse_toml(std::string_view text, std::string_view origin) {
  DRIFTSCOPE_TRY(check_nesting(text, origin, /*is_json=*/false));
  try {
    toml::parse_result parsed = toml::parse(text, std::string_view(origin));
    if (!parsed) {
      const auto& e = parsed.error();
      return config_error(origin, e.source().begin.line, e.source().begin.column,
                          one_line(e.description()));
    }
    return Converter(text, origin).convert(parsed.table(), 0);
  } catch (const std::bad_alloc&) {
    return make_error(Errc::limit_exceeded, fmt::format("{}: out of memory while parsing", origin));
  }
}

Result<nlohmann::json> parse_config(std::string_view text, std::string_view origin) {
  // Checked before any parsing: the parsers' memory grows with the text.
  if (text.size() > kMaxConfigBytes)
    return make_error(Errc::limit_exceeded,
                      fmt::format("{}: {} bytes, larger than {} bytes", origin, text.size(), kMaxConfigBytes));
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  if (i < text.size() && text[i] == '{') {
    DRIFTSCOPE_TRY(check_nesting(text, origin, /*is_json=*/true));
    try {
      return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
      // e.byte is 1-based: the position after the last byte read.
      Position p = position_of(text, e.byte > 0 ? e.byte - 1 : 0);
      std::string what = e.what();
      if (auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
      return config_error(origin, p.line, p.column, "not valid JSON: " + one_line(what));
    } catch (const std::bad_alloc&) {
      return make_error(Errc::limit_exceeded, fmt::format("{}: out of memory while parsing", origin));
    }
  }
  return parse_toml(text, origin);  // whole text: line numbers in errors stay right
}

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io_error, fmt::format("cannot open '{}'", path));
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      return make_error(Errc::limit_exceeded,
                        fmt::format("'{}' is larger than {} bytes", path, max_bytes));
  }
  if (in.bad()) return make_error(Errc::io_error, fmt::format("cannot read '{}'", path));
  return text;
}

}  // namespace driftscope::compare_detail
