// `driftscope guard`'s text and Markdown reports (include/driftscope/report.hpp), rendered from the
// guard's model: its JSON report (docs/guard-schema.json) with a "diagnostics" string per backend
// and a "render" object (what the JSON keeps only as null, or not at all). The Python guard
// assembles the model (python/driftscope/_guard/_report.py: the verdict, the sentences); every
// layout, number format, shortening and escaping of the guard's reports is here, as for the
// compare and check reports. The sentences of one output's judgement (guard_output_detail, an
// output's "detail") are worded here too, from the judgement's codes and figures.
//
// The reports were written by Python before (issue 25) and their bytes are kept: lengths and
// column widths count code points as Python's len() does, whitespace is Python's str.isspace(),
// lines are split as str.splitlines() splits them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "driftscope/report.hpp"
#include "driftscope/text.hpp"

namespace driftscope {
namespace {

using Json = nlohmann::json;
using U32 = std::u32string;

// ---- UTF-8 <-> code points (the model is valid UTF-8: nlohmann's parser rejects anything else) --

U32 decode(std::string_view s) {
  U32 out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i + n > s.size()) n = 1;  // not reached on valid UTF-8
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += c;
    i += n;
  }
  return out;
}

std::string encode(const U32& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

size_t length(std::string_view s) {  // Python's len(): code points
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Python's str.isspace().
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.isalnum() for the code points printable() lets through. ASCII exactly; beyond it,
// the punctuation, symbol and space blocks a name plausibly holds are not alphanumeric, every
// other code point (letters and digits of any script) is.
bool is_alnum(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_space(c)) return false;
  if ((c >= 0xA1 && c <= 0xBF && c != 0xAA && c != 0xB2 && c != 0xB3 && c != 0xB5 && c != 0xB9 && c != 0xBA &&
       c != 0xBC && c != 0xBD && c != 0xBE) ||
      c == 0xD7 || c == 0xF7)
    return false;
  if ((c >= 0x2010 && c <= 0x206F) || (c >= 0x2190 && c <= 0x23FF) || (c >= 0x2500 && c <= 0x27BF) ||
      (c >= 0x2900 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F && c != 0x3005 && c != 0x3006 && c != 0x3007) ||
      (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0x1F000 && c <= 0x1FAFF))
    return false;
  return true;
}

std::string rstrip(std::string_view s) {  // Python's str.rstrip()
  U32 u = decode(s);
  while (!u.empty() && is_space(u.back())) u.pop_back();
  return encode(u);
}

std::string ljust(std::string_view s, size_t width) {
  std::string out(s);
  for (size_t n = length(s); n < width; ++n) out += ' ';
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// ---- SHA-1 (FIPS 180-4), for the stable short form of a long name -------------------------------

std::string sha1_hex(std::string_view data) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  std::string msg(data);
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  msg += static_cast<char>(0x80);
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 7; i >= 0; --i) msg += static_cast<char>((bits >> (8 * i)) & 0xFF);
  auto rol = [](uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[80];
    for (int t = 0; t < 16; ++t) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + off + 4 * t);
      w[t] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    }
    for (int t = 16; t < 80; ++t) w[t] = rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int t = 0; t < 80; ++t) {
      uint32_t f, k;
      if (t < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999;
      } else if (t < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDC;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6;
      }
      const uint32_t tmp = rol(a, 5) + f + e + k + w[t];
      e = d;
      d = c;
      c = rol(b, 30);
      b = a;
      a = tmp;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  std::string out;
  char buf[9];
  for (uint32_t x : h) {
    std::snprintf(buf, sizeof buf, "%08x", x);
    out += buf;
  }
  return out;
}

// ---- long names ----------------------------------------------------------------------------------
// Names from tf2onnx graphs join every op they fuse with ';' (hundreds of characters): in text and
// Markdown a longer run without spaces shows its head and tail and a stable short form (a hash of
// the whole run, so two long names never read alike); the JSON keeps every name whole.
constexpr size_t kNameChars = 80;

// HEAD...TAIL~HASH (74 characters), the quotes and brackets around the run kept.
U32 short_name(const U32& token) {
  if (token.size() <= kNameChars) return token;
  static const U32 open = U"([{", close = U")]},:;.";
  size_t lead = 0;
  while (lead < token.size() && open.find(token[lead]) != U32::npos) ++lead;
  size_t end = token.size();
  while (end > lead && close.find(token[end - 1]) != U32::npos) --end;
  const U32 core = token.substr(lead, end - lead);
  const std::string tag = sha1_hex(encode(core)).substr(0, 6);
  const size_t keep = std::min<size_t>(32, core.size());
  U32 out = token.substr(0, lead) + core.substr(0, keep) + U"..." + core.substr(core.size() - keep);
  out += U"~";
  for (char c : tag) out += static_cast<char32_t>(c);
  return out + token.substr(end);
}

// Every run of more than kNameChars characters other than whitespace and quotes (a name quoted in
// a recipe or a sentence is shortened alone) as short_name gives it.
std::string shorten(std::string_view text) {
  const U32 u = decode(text);
  U32 out;
  auto breaks = [](char32_t c) { return is_space(c) || c == U'\'' || c == U'"'; };
  for (size_t i = 0; i < u.size();) {
    if (breaks(u[i])) {
      out += u[i++];
      continue;
    }
    size_t j = i;
    while (j < u.size() && !breaks(u[j])) ++j;
    const U32 run = u.substr(i, j - i);
    out += run.size() > kNameChars ? short_name(run) : run;
    i = j;
  }
  return encode(out);
}

std::string shown(std::string_view s) { return shorten(printable(s)); }

// ---- Markdown (the rule of python/driftscope/_text.py, which the guard's reports followed) ------

// printable(text), then every Markdown-active character backslash-escaped: safe in a paragraph, a
// list item and a table cell. An underscore between two letters or digits never delimits emphasis
// (CommonMark 6.2), so NUMERICAL_INSTABILITY stays as written; the second '/' of "//" is escaped
// so that no scheme or protocol-relative host is autolinked.
std::string md_text(std::string_view text) {
  const U32 s = decode(printable(text));
  static const U32 active = U"\\`*_[]<>|~!#&.@";
  U32 out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    const bool word_underscore =
        c == U'_' && i > 0 && i + 1 < s.size() && is_alnum(s[i - 1]) && is_alnum(s[i + 1]);
    if ((active.find(c) != U32::npos && !word_underscore) || (c == U'/' && i > 0 && s[i - 1] == U'/')) out += U'\\';
    out += c;
  }
  return encode(out);
}

// printable(text) as one inline code span: the fence one longer than its longest run of
// backticks, padded with spaces when it starts or ends with one or is all spaces (CommonMark
// 6.1); a '|' escaped for GitHub tables (GFM 4.10 splits cells first).
std::string md_code(std::string_view text) {
  const std::string s = printable(text);
  size_t run = 0, longest = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = s.empty() || s.front() == '`' || s.back() == '`' || s.find_first_not_of(' ') == std::string::npos;
  std::string body;
  for (char c : s) {
    if (c == '|') body += '\\';
    body += c;
  }
  const std::string p = pad ? " " : "";
  return fence + p + body + p + fence;
}

// ---- numbers as Python's format() writes them -----------------------------------------------------

// A model number: JSON null is absent; "nan", "inf" and "-inf" are the non-finite values the JSON
// report writes as null but the tables show.
std::optional<double> number(const Json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
  }
  return std::nullopt;
}

// format(x, spec) for a C-style spec ("%.3g"): Python spells non-finite values nan, inf, -inf.
std::string fmt(double x, const char* spec) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

// _fmt of the old renderer: "-" for none, "nan" for NaN.
std::string fmt_or_dash(const Json& j, const char* spec) {
  const auto x = number(j);
  return x ? fmt(*x, spec) : "-";
}

// str() of a JSON scalar as Python would print the value it came from.
std::string str(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_integer()) return j.dump();
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_null()) return "None";
  return j.dump();
}

const Json& at(const Json& j, const char* key) {
  static const Json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

std::string text_of(const Json& j, const char* key) {
  const Json& v = at(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

bool truthy(const Json& j) {
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_string()) return !j.get_ref<const std::string&>().empty();
  if (j.is_number()) return j.get<double>() != 0;
  return !j.empty();
}

// Python's str.splitlines().
std::vector<std::string> splitlines(std::string_view s) {
  const U32 u = decode(s);
  std::vector<std::string> out;
  U32 cur;
  for (size_t i = 0; i < u.size(); ++i) {
    const char32_t c = u[i];
    if (c == U'\n' || c == U'\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
        c == 0x2028 || c == 0x2029) {
      if (c == U'\r' && i + 1 < u.size() && u[i + 1] == U'\n') ++i;
      out.push_back(encode(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(encode(cur));
  return out;
}

// ---- the model ------------------------------------------------------------------------------------

struct Model {
  Json doc;
  bool llm = false;

  const Json& render() const { return at(doc, "render"); }
  const Json& row_render(size_t i) const {
    static const Json null;
    const Json& rows = at(render(), "rows");
    return rows.is_array() && i < rows.size() ? rows[i] : null;
  }
};

Result<Model> parse(std::string_view model_json) {
  Model m;
  m.doc = Json::parse(model_json, nullptr, /*allow_exceptions=*/false);
  if (m.doc.is_discarded() || !m.doc.is_object())
    return make_error(Errc::invalid_argument, "guard report: not a JSON object");
  for (const char* key : {"summary", "backends", "render"}) {
    if (!m.doc.contains(key))
      return make_error(Errc::invalid_argument, std::string("guard report: no \"") + key + "\"");
  }
  if (!m.doc["summary"].is_string() || !m.doc["backends"].is_array() || !m.doc["render"].is_object())
    return make_error(Errc::invalid_argument,
                      "guard report: needs a string \"summary\", an array \"backends\" and an object \"render\"");
  for (const Json& b : m.doc["backends"])
    if (!b.is_object()) return make_error(Errc::invalid_argument, "guard report: a backend is not a JSON object");
  m.llm = m.doc.contains("llm") && m.doc["llm"].is_object();
  return m;
}

// How many samples the verdict rests on and where they came from.
std::string samples_text(const Model& m) {
  const Json& d = m.doc;
  if (m.llm) {
    const Json& llm = d["llm"];
    const std::string how =
        truthy(at(llm, "prompts_given")) ? "from the entry point" : "generated token ids, seed " + str(at(d, "seed"));
    const Json& prompts = at(llm, "prompts");
    return std::to_string(prompts.is_array() ? prompts.size() : 0) + " prompt(s) (" + how + ") x " +
           str(at(llm, "new_tokens")) + " new tokens, teacher-forced with " + text_of(d, "reference") + "'s tokens";
  }
  const std::string src = text_of(d, "inputs_source"), n = str(at(d, "samples"));
  if (src == "real") return n + " real sample(s)";
  if (src == "mixed") return n + " sample(s) of real and synthetic inputs, seed " + str(at(d, "seed"));
  return n + " synthetic sample(s) (generated; --data judges real ones), seed " + str(at(d, "seed"));
}

std::string input_text(const Json& i) {
  if (i.contains("value"))
    return text_of(i, "name") + "=" + str(at(i, "value")) + " (" + text_of(i, "dtype") + "): " + text_of(i, "how");
  std::vector<std::string> dims;
  // (Appended, not "'" + s + "'": GCC 12 at -O3 reports a false -Wrestrict on operator+ of a
  // literal and a temporary string, which the shared-library check builds with -Werror.)
  for (const Json& x : at(i, "shape")) {
    if (!x.is_string()) {
      dims.push_back(str(x));
      continue;
    }
    std::string quoted(1, '\'');
    quoted.append(x.get_ref<const std::string&>()).push_back('\'');
    dims.push_back(std::move(quoted));
  }
  return text_of(i, "name") + " " + text_of(i, "dtype") + "[" + join(dims, ", ") + "]: " + text_of(i, "how");
}

// One backend's table row: backend, status, cosine, norm ref/cand, max diff, latency, diagnostics
// (the worst output's numbers; non-finite ones as the model's "nan"/"inf" strings).
std::vector<std::string> cells(const Json& b, const Json& r) {
  const Json& w = at(r, "worst");
  std::string lat = "-";
  if (auto ms = number(at(r, "latency_ms"))) {
    lat = fmt(*ms, "%.3g") + " ms";
    if (auto ratio = number(at(r, "latency_ratio"))) lat += " (" + fmt(*ratio, "%.2f") + "x)";
  }
  std::string norms = "-";
  if (!w.is_null() && number(at(w, "norm_ref")))
    norms = fmt_or_dash(at(w, "norm_ref"), "%.4g") + "/" + fmt_or_dash(at(w, "norm_cand"), "%.4g");
  std::string cos = "-";
  if (!w.is_null()) {
    if (auto c = number(at(w, "cosine"))) cos = *c == 1.0 ? "1" : fmt(*c, "%.6f");
  }
  const std::string diff = w.is_null() ? "-" : fmt_or_dash(at(w, "max_diff"), "%.3g");
  return {text_of(b, "name"), text_of(b, "status"), cos, norms, diff, lat, text_of(b, "diagnostics")};
}

const std::vector<std::string> kHeads = {"backend", "status",  "cosine",     "norm ref/cand",
                                         "max diff", "latency", "diagnostics"};

// The table: every column but the last padded to its widest cell, the last as it is.
void table(std::vector<std::string>& lines, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (size_t i = 0; i + 1 < kHeads.size(); ++i) {
    size_t w = length(kHeads[i]);
    for (const auto& r : rows) w = std::max(w, length(r[i]));
    widths.push_back(w);
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) out += ljust(c[i], widths[i]) + "  ";
    return rstrip(out + c.back());
  };
  lines.push_back(line(kHeads));
  for (const auto& r : rows) lines.push_back(line(r));
}

// The fallback's tradeoff table shows when it tried more than one precision or the budget stopped it.
bool shows_tradeoff(const Json& fb) {
  const Json& cands = at(fb, "candidates");
  return (cands.is_array() && cands.size() > 1) || truthy(at(at(fb, "budget"), "stopped"));
}

std::vector<std::string> strings(const Json& list) {
  std::vector<std::string> out;
  if (list.is_array())
    for (const Json& c : list) out.push_back(str(c));
  return out;
}

std::vector<std::vector<std::string>> string_rows(const Json& rows) {
  std::vector<std::vector<std::string>> out;
  if (rows.is_array())
    for (const Json& r : rows) out.push_back(strings(r));
  return out;
}

// "verified", or where: a float16 recipe says on which backends, and whether only where float16 is
// stored (never plain "verified" then).
std::string recipe_state(const Json& fb, const Json& fr) {
  if (!truthy(at(fb, "verified"))) return "NOT verified";
  const Json& where = at(fr, "where");
  if (!where.is_string()) return "verified";
  return "verified on " + where.get<std::string>() +
         (text_of(fb, "verification") == "storage only" ? " only: storage only, arithmetic not verified" : "");
}

// A recipe's lines, long names shortened; a first comment says so, for the shortened code no longer
// runs as printed.
std::vector<std::string> recipe_lines(std::string recipe) {
  while (!recipe.empty() && recipe.back() == '\n') recipe.pop_back();
  std::vector<std::string> lines, short_lines;
  for (const auto& ln : splitlines(recipe)) {
    lines.push_back(printable(ln));
    short_lines.push_back(shorten(lines.back()));
  }
  if (short_lines == lines) return lines;
  short_lines.insert(short_lines.begin(),
                     "# long names shortened (HEAD...TAIL~HASH); the JSON report's backends[].fallback.recipe has "
                     "them in full");
  return short_lines;
}

std::string join_lines(const std::vector<std::string>& lines) { return join(lines, "\n") + "\n"; }

std::string llm_text(const Model& m) {
  const Json& d = m.doc;
  const Json& llm = d["llm"];
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < d["backends"].size(); ++i) {
    auto c = cells(d["backends"][i], m.row_render(i));
    for (auto& x : c) x = printable(x);
    rows.push_back(std::move(c));
  }
  std::vector<std::string> prompts;
  const Json& ps = at(llm, "prompts");
  for (size_t i = 0; ps.is_array() && i < ps.size(); ++i)
    prompts.push_back(std::to_string(i + 1) + ": " +
                      std::to_string(ps[i].is_string() ? length(ps[i].get_ref<const std::string&>()) : ps[i].size()) +
                      " tokens");
  const Json& t = at(d, "thresholds");
  std::vector<std::string> lines = {
      printable(text_of(d, "summary")),
      "",
      "model      " + printable(text_of(d, "model")) + " (a language model: " + printable(text_of(llm, "source")) +
          "); reference " + text_of(d, "reference") + "; " + samples_text(m),
      "prompts    " + join(prompts, "; "),
      "thresholds per backend over every step: ARGMAX_FLIP when more than " +
          fmt_or_dash(at(t, "max_argmax_flip"), "%g") +
          " of the steps flip their greedy token; PRECISION_DEGRADATION when the max KL exceeds " +
          fmt_or_dash(at(llm, "max_kl"), "%g") + " or a prompt's mean top-" + str(at(llm, "top_k")) +
          " overlap is below " + fmt_or_dash(at(llm, "min_topk_overlap"), "%g"),
      ""};
  table(lines, rows);
  lines.insert(lines.end(), {"", "Findings"});
  for (const Json& f : at(d, "findings")) lines.push_back("  - " + printable(str(f)));
  return join_lines(lines);
}

}  // namespace

Result<std::string> guard_report_to_text(std::string_view model_json) {
  auto parsed = parse(model_json);
  if (!parsed) return parsed.error();
  const Model& m = *parsed;
  if (m.llm) return llm_text(m);
  const Json& d = m.doc;
  const Json& backends = d["backends"];
  // Every cell and line holds names from the model (outputs, inputs, nodes, errors): each goes
  // through driftscope's one escaping rule, once, here.
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < backends.size(); ++i) {
    auto c = cells(backends[i], m.row_render(i));
    for (auto& x : c) x = shown(x);
    rows.push_back(std::move(c));
  }
  std::vector<std::string> inputs;
  for (const Json& i : at(d, "inputs")) inputs.push_back(shown(input_text(i)));
  const Json& t = at(d, "thresholds");
  std::vector<std::string> lines = {
      printable(text_of(d, "summary")),
      "",
      "model      " + printable(text_of(d, "model")) + " (" + text_of(d, "family") + "); reference " +
          printable(text_of(d, "reference")) + "; " + samples_text(m) + "; latency = median of " + str(at(d, "runs")) +
          " runs of sample 1 (ratio to the reference)",
      "inputs     " + join(inputs, "; "),
      "thresholds min cosine " + fmt_or_dash(at(t, "min_cosine"), "%g") + ", max relative error " +
          fmt_or_dash(at(t, "max_rel_error"), "%.3g") + ", norm ratio within " +
          fmt_or_dash(at(t, "max_norm_ratio"), "%g") + "x, min norm " + fmt_or_dash(at(t, "min_norm"), "%g") +
          ", max argmax flip " + fmt_or_dash(at(t, "max_argmax_flip"), "%g"),
      "argmax     " + printable(text_of(m.render(), "argmax"))};
  const Json& metric = at(d, "metric");
  if (metric.is_object())
    lines.push_back("metric     " + printable(text_of(metric, "name")) +
                    ": a backend fails when its mean drop over the samples exceeds " +
                    fmt_or_dash(at(metric, "max_drop"), "%g") +
                    " (--max-drop); the cosine rules no longer decide a degradation");
  lines.push_back("");
  table(lines, rows);
  lines.insert(lines.end(), {"", "Findings"});
  for (const Json& f : at(d, "findings")) lines.push_back("  - " + shown(str(f)));
  for (size_t i = 0; i < backends.size(); ++i) {
    const Json& fb = at(backends[i], "fallback");
    if (!fb.is_object() || !shows_tradeoff(fb)) continue;
    const Json& fr = at(m.row_render(i), "fallback");
    const std::string name = printable(text_of(backends[i], "name")), budget = text_of(fr, "budget");
    auto rows_fb = string_rows(at(fr, "rows"));
    lines.push_back("");
    if (rows_fb.empty()) {  // the budget stopped a search that found no passing set
      lines.push_back("Fallback search for " + name + " (budget used: " + budget + ").");
      continue;
    }
    lines.push_back("Fallback candidates for " + name + " (budget used: " + budget + "):");
    const auto heads = strings(at(fr, "heads"));
    for (auto& r : rows_fb)
      for (auto& x : r) x = shown(x);
    std::vector<size_t> wid(heads.size(), 0);
    rows_fb.insert(rows_fb.begin(), heads);
    for (const auto& r : rows_fb)
      for (size_t k = 0; k < wid.size() && k < r.size(); ++k) wid[k] = std::max(wid[k], length(r[k]));
    for (const auto& r : rows_fb) {
      std::vector<std::string> padded;
      for (size_t k = 0; k < wid.size() && k < r.size(); ++k) padded.push_back(ljust(r[k], wid[k]));
      lines.push_back("  " + rstrip(join(padded, "  ")));
    }
  }
  for (size_t i = 0; i < backends.size(); ++i) {
    const Json& fb = at(backends[i], "fallback");
    if (!fb.is_object() || text_of(fb, "recipe").empty()) continue;
    const Json& fr = at(m.row_render(i), "fallback");
    lines.push_back("");
    lines.push_back(text_of(fr, "kept_as") + " fallback recipe for " + printable(text_of(backends[i], "name")) + " (" +
                    recipe_state(fb, fr) + "):");
    for (const auto& ln : recipe_lines(text_of(fb, "recipe"))) lines.push_back("    " + ln);
  }
  return join_lines(lines);
}

Result<std::string> guard_report_to_markdown(std::string_view model_json) {
  auto parsed = parse(model_json);
  if (!parsed) return parsed.error();
  const Model& m = *parsed;
  const Json& d = m.doc;
  const Json& backends = d["backends"];
  // Names from the model, escaped once for Markdown and terminals.
  auto esc = [](std::string_view s) { return md_text(shorten(printable(s))); };
  std::vector<std::string> out = {
      "### driftscope guard: " + md_text(text_of(d, "summary")),
      "",
      "Model " + md_code(text_of(d, "model")) + " (" + text_of(d, "family") + "), reference " +
          md_code(text_of(d, "reference")) + ", " + samples_text(m) + ".",
      "",
      "| backend | status | cosine | norm ref/cand | max diff | latency | diagnostics |",
      "|---|---|---:|---:|---:|---:|---|"};
  for (size_t i = 0; i < backends.size(); ++i) {
    std::vector<std::string> c = cells(backends[i], m.row_render(i));
    for (auto& x : c) x = esc(x);
    out.push_back("| " + join(c, " | ") + " |");
  }
  out.insert(out.end(), {"", "**Findings**", ""});
  for (const Json& f : at(d, "findings")) out.push_back("- " + esc(str(f)));
  for (size_t i = 0; i < backends.size(); ++i) {
    const Json& fb = at(backends[i], "fallback");
    if (!fb.is_object() || !shows_tradeoff(fb)) continue;
    const Json& fr = at(m.row_render(i), "fallback");
    const std::string name = md_text(text_of(backends[i], "name")), budget = md_text(text_of(fr, "budget"));
    const auto rows_fb = string_rows(at(fr, "rows"));
    if (rows_fb.empty()) {
      out.insert(out.end(), {"", "**Fallback search for " + name + "** (budget used: " + budget + ")."});
      continue;
    }
    const auto heads = strings(at(fr, "heads"));
    std::string rule = "|---|---|";
    for (size_t k = 3; k < heads.size(); ++k) rule += "---:|";
    out.insert(out.end(), {"", "**Fallback candidates for " + name + "** (budget used: " + budget + "):", "",
                           "| " + join(heads, " | ") + " |", rule + "---|"});
    for (auto r : rows_fb) {
      for (auto& x : r) x = esc(x);
      out.push_back("| " + join(r, " | ") + " |");
    }
  }
  for (size_t i = 0; i < backends.size(); ++i) {
    const Json& fb = at(backends[i], "fallback");
    if (!fb.is_object() || text_of(fb, "recipe").empty()) continue;
    const Json& fr = at(m.row_render(i), "fallback");
    // A fence longer than any run of backticks in the recipe (node names are the model's text)
    // cannot be closed by it (CommonMark 4.5).
    const std::string recipe = join(recipe_lines(text_of(fb, "recipe")), "\n");
    size_t run = 0, longest = 0;
    for (char c : recipe) {
      run = c == '`' ? run + 1 : 0;
      longest = std::max(longest, run);
    }
    const std::string fence(std::max<size_t>(3, longest + 1), '`');
    out.insert(out.end(), {"",
                           "**" + md_text(text_of(fr, "kept_as")) + " fallback recipe for " +
                               md_text(text_of(backends[i], "name")) + "** (" + recipe_state(fb, fr) + "):",
                           "", fence + "python", recipe, fence});
  }
  return join_lines(out);
}

// ---- one output's sentences (the "detail" of the guard's JSON report) --------------------------

// Written by the guard's Python (_guard/_metrics.py) until issue 25 moved the words here, beside
// the other sentences of the guard's reports; the bytes are Python's: %g-style numbers through
// fmt() above, "{:.1%}" as "%.1f" of 100 x the value.
std::string guard_output_detail(const OutputJudgement& j, const GuardCriteria& t, std::optional<uint32_t> class_axis) {
  if (j.count == 0) return "empty output";  // nothing to disagree about
  auto has = [&](std::string_view code) { return std::find(j.codes.begin(), j.codes.end(), code) != j.codes.end(); };
  auto n = [](uint64_t v) { return std::to_string(v); };
  std::vector<std::string> reasons;
  if (has("nonfinite"))
    reasons.push_back(n(j.nan) + " NaN and " + n(j.inf) + " Inf of " + n(j.count) +
                      " values where the reference is finite");
  if (has("all_zero") || has("norm_vanished"))
    reasons.push_back("L2 norm " + fmt(j.norm_cand, "%.3g") + " < " + fmt(t.min_norm, "%g") +
                      " where the reference's is " + fmt(j.norm_ref, "%.4g"));
  if (has("constant")) reasons.push_back("every value is " + fmt(j.constant_value, "%.6g") + " where the reference varies");
  if (has("cosine")) reasons.push_back("cosine " + fmt(j.cosine, "%.6f") + " < " + fmt(t.min_cosine, "%g"));
  if (has("rel_l2"))
    reasons.push_back("relative error " + fmt(j.rel_error, "%.4g") + " > " + fmt(t.rel_error_limit(), "%.3g"));
  if (has("norm_ratio"))
    reasons.push_back("norm ratio cand/ref " + fmt(j.norm_ratio, "%.4g") + " outside [" +
                      fmt(1.0 / t.max_norm_ratio, "%.4g") + ", " + fmt(t.max_norm_ratio, "%g") + "]");
  if (has("few_values"))
    reasons.push_back(n(j.beyond) + " of " + n(j.finite_pairs) + " values beyond |diff| <= " + fmt(t.small_atol, "%g") +
                      " + " + fmt(t.small_rtol, "%g") + "|ref| (worst " + fmt(j.worst_ref, "%.6g") + " -> " +
                      fmt(j.worst_cand, "%.6g") + "; a cosine cannot judge so few values)");
  if (has("decision_flip"))
    reasons.push_back("decision flip: " + n(j.decisions) + " score(s) cross " + fmt(t.decision_threshold, "%g") + " (" +
                      fmt(j.decision_ref, "%.6g") + " -> " + fmt(j.decision_cand, "%.6g") + ")");
  if (has("argmax"))
    reasons.push_back("top-1 over axis " + (class_axis ? n(*class_axis) : std::string("None")) + " changes at " +
                      fmt(j.argmax_flip * 100, "%.1f") + "% of " + n(j.positions) + " positions");
  if (j.ties)
    reasons.push_back(n(j.ties) + " near-tie(s) whose top-1 swapped within " + fmt(t.flip_rtol, "%g") +
                      " of the row's largest value, not counted as flips");
  if (!j.healthy)
    reasons.push_back("the reference's norm " + fmt(j.norm_ref, "%.3g") + " is below " + fmt(t.min_norm, "%g") +
                      ", so a vanished output cannot be told apart");
  return join(reasons, "; ");
}

}  // namespace driftscope
