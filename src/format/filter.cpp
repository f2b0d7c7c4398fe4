// Filters (docs/filters.md). Parsing does all the work of validation so that accepts(), called
// once per offered tensor, is a handful of integer compares followed by the name globs.
#include "driftscope/filter.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <numeric>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/bytes.hpp"
#include "driftscope/limits.hpp"

namespace driftscope {

namespace {

enum class Cmp : uint8_t { eq, ne, lt, le, gt, ge };

constexpr std::array<std::string_view, 6> kCmpText{"=", "!=", "<", "<=", ">", ">="};

bool compare(uint64_t lhs, Cmp op, uint64_t rhs) noexcept {
  switch (op) {
    case Cmp::eq: return lhs == rhs;
    case Cmp::ne: return lhs != rhs;
    case Cmp::lt: return lhs < rhs;
    case Cmp::le: return lhs <= rhs;
    case Cmp::gt: return lhs > rhs;
    case Cmp::ge: return lhs >= rhs;
  }
  return false;
}

struct Predicate {
  Cmp op = Cmp::eq;
  uint64_t value = 0;
};

// dim[index] OP value; `any` for the index-less form (some dim satisfies it).
struct DimPredicate {
  bool any = true;
  int32_t index = 0;  // negative counts from the end, as in Python
  Predicate pred;
};

// Decodes one UTF-8 code point for '?' and classes; an invalid byte counts as one character so
// that matching never stalls on a malformed name (names are validated by the writer anyway).
uint32_t next_cp(std::string_view s, size_t& i) noexcept {
  auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 1;
  if (i + len > s.size()) len = 1;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) len = 1;
  if (len == 1) {
    ++i;
    return b0;
  }
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

// Matches code point `c` against the class starting just after '[' at p[j]. On success sets `end`
// to the index after the closing ']'. Returns false for `end == npos` when the class is
// unterminated (the '[' is then a literal).
bool class_match(std::string_view p, size_t j, uint32_t c, size_t& end) noexcept {
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  while (j < p.size()) {
    if (p[j] == ']' && !first) {
      end = j + 1;
      return matched != negate;
    }
    first = false;
    if (p[j] == '\\' && j + 1 < p.size()) ++j;
    uint32_t lo = next_cp(p, j);
    uint32_t hi = lo;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      ++j;
      if (p[j] == '\\' && j + 1 < p.size()) ++j;
      hi = next_cp(p, j);
    }
    if (lo <= c && c <= hi) matched = true;
  }
  end = std::string_view::npos;
  return false;
}

// Validation of a glob at parse time, so a typo is an error rather than a silent literal.
// Returns the offending index into `p` and a reason, or npos.
size_t glob_problem(std::string_view p, std::string& why) {
  for (size_t i = 0; i < p.size();) {
    if (p[i] == '\\') {
      if (i + 1 == p.size()) {
        why = "dangling '\\' at the end of the pattern";
        return i;
      }
      i += 2;
      continue;
    }
    if (p[i] != '[') {
      ++i;
      continue;
    }
    size_t open = i;
    size_t j = i + 1;
    if (j < p.size() && (p[j] == '!' || p[j] == '^')) ++j;
    bool first = true;
    bool closed = false;
    while (j < p.size()) {
      if (p[j] == ']' && !first) {
        closed = true;
        ++j;
        break;
      }
      first = false;
      if (p[j] == '\\' && j + 1 < p.size()) ++j;
      size_t lo_at = j;
      uint32_t lo = next_cp(p, j);
      if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
        ++j;
        if (p[j] == '\\' && j + 1 < p.size()) ++j;
        uint32_t hi = next_cp(p, j);
        if (hi < lo) {
          why = fmt::format("reversed range '{}' in character class", p.substr(lo_at, j - lo_at));
          return lo_at;
        }
      }
    }
    if (!closed) {
      why = "unterminated character class '[' (no closing ']')";
      return open;
    }
    i = j;
  }
  return std::string_view::npos;
}

// A glob compiled once at parse time. Most filter globs are a literal name, a literal prefix
// and a trailing '*' ("encoder.layers.3*") or a '*' and a literal suffix ("*.dropout"); those
// become one compare, and any other glob is rejected by its literal prefix before the general
// matcher runs.
struct Glob {
  enum class Kind : uint8_t { exact, prefix, suffix, general };
  std::string text;     // as written, escapes included (to_string prints it back)
  std::string literal;  // exact: the name; prefix/general: the literal head; suffix: the tail
  Kind kind = Kind::general;

  explicit Glob(std::string_view g) : text(g) {
    static constexpr std::string_view kMeta = "*?[\\";
    size_t i = g.find_first_of(kMeta);
    literal = std::string(g.substr(0, i));
    if (i == std::string_view::npos) {
      kind = Kind::exact;
    } else if (i + 1 == g.size() && g[i] == '*') {
      kind = Kind::prefix;
    } else if (i == 0 && g[0] == '*' && g.find_first_of(kMeta, 1) == std::string_view::npos) {
      kind = Kind::suffix;
      literal = std::string(g.substr(1));
    }
  }
  bool match(std::string_view s) const noexcept {
    switch (kind) {
      case Kind::exact: return s == literal;
      case Kind::prefix: return s.starts_with(literal);
      case Kind::suffix: return s.ends_with(literal);
      case Kind::general: return s.starts_with(literal) && glob_match(text, s);
    }
    return false;
  }
};

bool any_glob(const std::vector<Glob>& globs, std::string_view text) noexcept {
  for (const auto& g : globs)
    if (g.match(text)) return true;
  return false;
}

std::string join_globs(const std::vector<Glob>& globs, std::string_view sep) {
  std::string out;
  for (const auto& g : globs) {
    // "op=" then a glob starting with '=' would read back as the operator "==" (found by
    // fuzz_filter_parse: "op===x" printed "op==x", which parses to the glob "x").
    if (out.empty() && g.text.starts_with('=')) out += '\\';
    else if (!out.empty()) out += sep;
    out += g.text;
  }
  return out;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) noexcept {
  // Iterative matching with a single backtrack point (the last '*'): a later star subsumes any
  // earlier one, so this is O(|pattern| × |text|) at worst and never exponential.
  size_t p = 0, t = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      char pc = pattern[p];
      if (pc == '*') {
        star_p = ++p;
        star_t = t;
        continue;
      }
      if (pc == '?') {
        ++p;
        next_cp(text, t);
        continue;
      }
      if (pc == '[') {
        size_t t_next = t;
        uint32_t c = next_cp(text, t_next);
        size_t end = 0;
        bool ok = class_match(pattern, p + 1, c, end);
        if (end != std::string_view::npos) {
          if (ok) {
            p = end;
            t = t_next;
            continue;
          }
        } else if (text[t] == '[') {  // unterminated: a literal '['
          ++p;
          ++t;
          continue;
        }
      } else {
        size_t lit = (pc == '\\' && p + 1 < pattern.size()) ? p + 1 : p;
        if (pattern[lit] == text[t]) {
          p = lit + 1;
          ++t;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    size_t adv = star_t;
    next_cp(text, adv);
    star_t = adv;
    t = adv;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {
constexpr uint8_t kRolePresent = 0x80;
constexpr uint32_t kDTypePresent = 1;  // bit 0: no dtype has code 0

struct FilterData {
  std::vector<Glob> includes;
  std::vector<Glob> excludes;
  std::vector<std::vector<Glob>> ops;  // each clause: one of its globs must match
  uint8_t role_mask = 0;                       // bit per Role, plus kRolePresent; 0: no clause
  uint32_t dtype_mask = 0;                     // bit per dtype code; 0: no dtype clause
  std::vector<Predicate> rank;
  std::vector<Predicate> numel;
  std::vector<DimPredicate> dims;
  std::vector<uint64_t> every;
  std::optional<uint64_t> budget;

  bool empty() const {
    return includes.empty() && excludes.empty() && ops.empty() && role_mask == 0 &&
           dtype_mask == 0 && rank.empty() && numel.empty() && dims.empty() && every.empty() &&
           !budget;
  }
};
}  // namespace

struct Filter::Impl : FilterData {};

namespace {

constexpr std::array<std::string_view, 8> kKeys{"op",   "role", "dtype", "rank",
                                                "numel", "dim", "every", "budget"};

struct Clause {
  std::string_view text;
  size_t pos = 0;  // 0-based offset of the clause in the filter string
};

class Parser {
 public:
  Parser(std::string_view text, FilterData& out) : text_(text), out_(out) {}

  Result<void> run() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++i;
        continue;
      }
      size_t start = i;
      while (i < text_.size()) {
        char d = text_[i];
        if (d == '\\' && i + 1 < text_.size()) {
          i += 2;
          continue;
        }
        if (d == ';' || d == ' ' || d == '\t' || d == '\n' || d == '\r' || d == '\f' || d == '\v')
          break;
        ++i;
      }
      DRIFTSCOPE_TRY(clause({text_.substr(start, i - start), start}));
    }
    return {};
  }

 private:
  // Positions in messages are 1-based columns of the whole filter string.
  Error fail(const Clause& c, size_t at, std::string_view why) const {
    return make_error(Errc::filter_syntax,
                      fmt::format("filter column {}: {} (in clause '{}' at column {})",
                                  c.pos + at + 1, why, c.text, c.pos + 1));
  }

  Result<void> clause(const Clause& c) {
    char first = c.text[0];
    if (first == '+' || first == '-' || first == '!')
      return pattern(c, 1, first == '+' ? out_.includes : out_.excludes);
    // KEY [ '[' INDEX ']' ] OP VALUE, where KEY is lowercase letters; anything else is a glob.
    size_t k = 0;
    while (k < c.text.size() && c.text[k] >= 'a' && c.text[k] <= 'z') ++k;
    size_t after_key = k;
    if (k > 0 && k < c.text.size() && c.text[k] == '[') {
      size_t close = c.text.find(']', k);
      if (close != std::string_view::npos) k = close + 1;
    }
    size_t op_len = 0;
    Cmp op = Cmp::eq;
    if (k > 0) op_len = read_cmp(c.text.substr(k), op);
    if (op_len == 0) return pattern(c, 0, out_.includes);

    std::string_view key = c.text.substr(0, after_key);
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      return fail(c, 0,
                  fmt::format("unknown key '{}' (known: op role dtype rank numel dim every budget; "
                              "write '+{}' for a name pattern)",
                              key, c.text));
    if (k != after_key && key != "dim")
      return fail(c, after_key, fmt::format("'{}' takes no [index]", key));
    size_t v = k + op_len;
    std::string_view value = c.text.substr(v);
    if (value.empty()) return fail(c, v, fmt::format("missing value after '{}'", c.text));

    if (key == "op" || key == "role" || key == "dtype" || key == "every" || key == "budget") {
      if (op != Cmp::eq)
        return fail(c, k, fmt::format("'{}' takes '=', not '{}'", key, kCmpText[size_t(op)]));
    }
    if (key == "op") return op_list(c, v);
    if (key == "role") return role_list(c, v);
    if (key == "dtype") return dtype_list(c, v);
    if (key == "every") {
      auto n = number(c, v, false);
      if (!n) return std::move(n).error();
      if (*n == 0) return fail(c, v, "every=N needs N >= 1");
      out_.every.push_back(*n);
      return {};
    }
    if (key == "budget") {
      if (out_.budget) return fail(c, 0, "budget given twice");
      auto n = bytes(c, v);
      if (!n) return std::move(n).error();
      out_.budget = *n;
      return {};
    }
    auto n = number(c, v, key == "numel");
    if (!n) return std::move(n).error();
    if (key == "rank") {
      out_.rank.push_back({op, *n});
    } else if (key == "numel") {
      out_.numel.push_back({op, *n});
    } else {  // dim
      DimPredicate d;
      d.pred = {op, *n};
      if (k != after_key) {
        std::string_view idx = c.text.substr(after_key + 1, k - after_key - 2);
        int32_t iv = 0;
        auto [ptr, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), iv);
        if (idx.empty() || ec != std::errc{} || ptr != idx.data() + idx.size() ||
            iv >= int32_t(limits::kMaxRank) || iv < -int32_t(limits::kMaxRank))
          return fail(c, after_key + 1,
                      fmt::format("dim index '{}' is not an integer in -{}..{}", idx,
                                  limits::kMaxRank, limits::kMaxRank - 1));
        d.any = false;
        d.index = iv;
      }
      out_.dims.push_back(d);
    }
    return {};
  }

  // Two-character operators first, so "<=" is not read as "<" followed by "=3".
  static size_t read_cmp(std::string_view s, Cmp& op) {
    struct Row {
      std::string_view text;
      Cmp op;
    };
    static constexpr Row kRows[] = {{"==", Cmp::eq}, {"!=", Cmp::ne}, {"<=", Cmp::le},
                                    {">=", Cmp::ge}, {"=", Cmp::eq},  {"<", Cmp::lt},
                                    {">", Cmp::gt}};
    for (const auto& r : kRows) {
      if (s.substr(0, r.text.size()) == r.text) {
        op = r.op;
        return r.text.size();
      }
    }
    return 0;
  }

  Result<void> check_glob(const Clause& c, size_t at, std::string_view glob) const {
    if (glob.empty()) return fail(c, at, "empty pattern");
    std::string why;
    size_t bad = glob_problem(glob, why);
    if (bad != std::string_view::npos) return fail(c, at + bad, why);
    return {};
  }

  Result<void> pattern(const Clause& c, size_t at, std::vector<Glob>& into) {
    std::string_view glob = c.text.substr(at);
    DRIFTSCOPE_TRY(check_glob(c, at, glob));
    into.emplace_back(glob);
    return {};
  }

  // Splits VALUE at commas; a backslash-escaped comma stays in the item (op globs only need it).
  template <class F>
  Result<void> items(const Clause& c, size_t v, F&& each) {
    size_t i = v;
    while (true) {
      size_t start = i;
      while (i < c.text.size() && c.text[i] != ',') i += (c.text[i] == '\\' && i + 1 < c.text.size()) ? 2 : 1;
      std::string_view item = c.text.substr(start, i - start);
      if (item.empty()) return fail(c, start, "empty list item");
      DRIFTSCOPE_TRY(each(item, start));
      if (i >= c.text.size()) return {};
      ++i;
    }
  }

  Result<void> op_list(const Clause& c, size_t v) {
    std::vector<Glob> globs;
    DRIFTSCOPE_TRY(items(c, v, [&](std::string_view item, size_t at) -> Result<void> {
      DRIFTSCOPE_TRY(check_glob(c, at, item));
      globs.emplace_back(item);
      return {};
    }));
    out_.ops.push_back(std::move(globs));
    return {};
  }

  Result<void> role_list(const Clause& c, size_t v) {
    uint8_t mask = 0;
    DRIFTSCOPE_TRY(items(c, v, [&](std::string_view item, size_t at) -> Result<void> {
      for (uint8_t r = 0; r < 4; ++r) {
        if (role_name(Role{r}) == item) {
          mask = uint8_t(mask | (1u << r));
          return {};
        }
      }
      return fail(c, at, fmt::format("unknown role '{}' (known: output input parameter other)", item));
    }));
    // Two role clauses must both hold: the allowed set is their intersection. Bit 7 (no role
    // has it) marks "a role clause exists", so an empty intersection rejects everything.
    out_.role_mask = uint8_t((out_.role_mask ? (out_.role_mask & mask) : mask) | kRolePresent);
    return {};
  }

  Result<void> dtype_list(const Clause& c, size_t v) {
    uint32_t mask = 0;
    DRIFTSCOPE_TRY(items(c, v, [&](std::string_view item, size_t at) -> Result<void> {
      auto t = parse_dtype(item);
      if (!t) return fail(c, at, fmt::format("unknown dtype '{}'", item));
      mask |= 1u << static_cast<uint16_t>(*t);
      return {};
    }));
    out_.dtype_mask = (out_.dtype_mask ? (out_.dtype_mask & mask) : mask) | kDTypePresent;
    return {};
  }

  // Unsigned integer with an optional decimal suffix (k, M, G, T: 10^3 ... 10^12) for counts;
  // a fraction is allowed when the suffix makes the result whole ("1.5k").
  Result<uint64_t> number(const Clause& c, size_t v, bool suffixes) {
    std::string_view s = c.text.substr(v);
    size_t i = 0;
    uint64_t mant = 0;
    uint64_t frac_div = 1;
    bool digits = false, dot = false;
    for (; i < s.size(); ++i) {
      if (s[i] == '.' && !dot && suffixes) {
        dot = true;
        continue;
      }
      if (s[i] < '0' || s[i] > '9') break;
      digits = true;
      if (mant > (~uint64_t{0} - 9) / 10) return fail(c, v, "number out of range");
      mant = mant * 10 + uint64_t(s[i] - '0');
      if (dot) {
        if (frac_div > ~uint64_t{0} / 10) return fail(c, v, "number out of range");
        frac_div *= 10;
      }
    }
    if (!digits) return fail(c, v + i, fmt::format("expected a number, found '{}'", s.substr(i)));
    uint64_t mult = 1;
    std::string_view suf = s.substr(i);
    if (!suf.empty()) {
      if (!suffixes) return fail(c, v + i, fmt::format("unexpected '{}' after the number", suf));
      if (suf == "k") mult = 1000;
      else if (suf == "M") mult = 1000000;
      else if (suf == "G") mult = 1000000000;
      else if (suf == "T") mult = 1000000000000;
      else return fail(c, v + i, fmt::format("unknown suffix '{}' (use k, M, G or T)", suf));
    }
    return scale(c, v, mant, frac_div, mult);
  }

  Result<uint64_t> scale(const Clause& c, size_t v, uint64_t mant, uint64_t frac_div, uint64_t mult) {
    // mant × mult / frac_div is whole iff frac_div divides mant once the common factor of mult
    // and frac_div is cancelled (then they are coprime).
    uint64_t g = std::gcd(mult, frac_div);
    mult /= g;
    frac_div /= g;
    if (mant % frac_div != 0) return fail(c, v, "value is not a whole number");
    auto total = detail::checked_mul(mant / frac_div, mult);
    if (!total) return fail(c, v, "number out of range");
    return *total;
  }

  // Byte sizes: decimal (k/kB, M/MB, G/GB, T/TB) and binary (KiB, MiB, GiB, TiB) units.
  Result<uint64_t> bytes(const Clause& c, size_t v) {
    std::string_view s = c.text.substr(v);
    size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    struct Unit {
      std::string_view name;
      uint64_t mult;
    };
    static constexpr Unit kUnits[] = {
        {"", 1},           {"B", 1},           {"k", 1000},          {"kB", 1000},
        {"M", 1000000},    {"MB", 1000000},    {"G", 1000000000},    {"GB", 1000000000},
        {"T", 1000000000000}, {"TB", 1000000000000}, {"KiB", uint64_t{1} << 10},
        {"MiB", uint64_t{1} << 20}, {"GiB", uint64_t{1} << 30}, {"TiB", uint64_t{1} << 40}};
    std::string_view suf = s.substr(i);
    const Unit* unit = nullptr;
    for (const auto& u : kUnits)
      if (u.name == suf) unit = &u;
    if (!unit)
      return fail(c, v + i,
                  fmt::format("unknown unit '{}' (use B, k, M, G, T, kB, MB, GB, TB, KiB, MiB, "
                              "GiB or TiB)",
                              suf));
    std::string_view num = s.substr(0, i);
    size_t dotp = num.find('.');
    if (num.empty() || num == "." || (dotp != std::string_view::npos && num.find('.', dotp + 1) != std::string_view::npos))
      return fail(c, v, fmt::format("expected a byte count, found '{}'", s));
    uint64_t mant = 0, frac_div = 1;
    bool dot = false;
    for (char ch : num) {
      if (ch == '.') {
        dot = true;
        continue;
      }
      if (mant > (~uint64_t{0} - 9) / 10) return fail(c, v, "number out of range");
      mant = mant * 10 + uint64_t(ch - '0');
      if (dot) {
        if (frac_div > ~uint64_t{0} / 10) return fail(c, v, "number out of range");
        frac_div *= 10;
      }
    }
    return scale(c, v, mant, frac_div, unit->mult);
  }

  std::string_view text_;
  FilterData& out_;
};

bool check_dim(const DimPredicate& d, const std::vector<uint64_t>& shape) noexcept {
  if (d.any) {
    for (uint64_t x : shape)
      if (compare(x, d.pred.op, d.pred.value)) return true;
    return false;
  }
  int64_t idx = d.index < 0 ? int64_t(shape.size()) + d.index : d.index;
  if (idx < 0 || idx >= int64_t(shape.size())) return false;
  return compare(shape[size_t(idx)], d.pred.op, d.pred.value);
}

// An include pattern prints without '+' unless it would then read as a key clause or an
// exclude; the parser's own classification decides, so the round trip is exact by construction.
bool needs_plus(std::string_view pattern) {
  if (pattern.empty()) return true;
  if (pattern[0] == '+' || pattern[0] == '-' || pattern[0] == '!') return true;
  FilterData probe;
  Parser p(pattern, probe);
  auto r = p.run();
  return !r.ok() || probe.includes.size() != 1;
}

}  // namespace

Filter::Filter() : impl_(std::make_unique<Impl>()) {}
Filter::~Filter() = default;
Filter::Filter(const Filter& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Filter& Filter::operator=(const Filter& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;

Result<Filter> Filter::parse(std::string_view text) {
  Filter f;
  Parser p(text, *f.impl_);
  DRIFTSCOPE_TRY(p.run());
  return f;
}

bool Filter::accepts(const TensorInfo& info, uint64_t exec_index) const {
  // A moved-from filter has no impl; treat it like the empty filter rather than crash.
  if (!impl_) return true;
  const Impl& f = *impl_;
  for (uint64_t n : f.every)
    if (exec_index % n != 0) return false;
  if (f.role_mask) {
    auto role = static_cast<uint8_t>(info.role);  // a value outside the enum matches no role
    if (role > 3 || !(f.role_mask & ~kRolePresent & (1u << role))) return false;
  }
  if (f.dtype_mask) {
    auto code = static_cast<uint16_t>(info.dtype);
    if (code >= 32 || !(f.dtype_mask & ~kDTypePresent & (1u << code))) return false;
  }
  if (!f.rank.empty()) {
    uint64_t r = info.shape.size();
    for (const auto& p : f.rank)
      if (!compare(r, p.op, p.value)) return false;
  }
  if (!f.numel.empty()) {
    uint64_t n = info.numel();
    for (const auto& p : f.numel)
      if (!compare(n, p.op, p.value)) return false;
  }
  for (const auto& d : f.dims)
    if (!check_dim(d, info.shape)) return false;
  for (const auto& globs : f.ops)
    if (!any_glob(globs, info.op_type)) return false;
  return may_accept_name(info.name);
}

bool Filter::may_accept_name(std::string_view name) const {
  if (!impl_) return true;
  if (any_glob(impl_->excludes, name)) return false;
  return impl_->includes.empty() || any_glob(impl_->includes, name);
}

std::optional<uint64_t> Filter::byte_budget() const { return impl_ ? impl_->budget : std::nullopt; }

bool Filter::empty() const { return !impl_ || impl_->empty(); }

std::string Filter::to_string() const {
  if (!impl_) return {};
  const Impl& f = *impl_;
  std::vector<std::string> parts;
  for (const auto& g : f.includes) parts.push_back(needs_plus(g.text) ? "+" + g.text : g.text);
  for (const auto& g : f.excludes) parts.push_back("-" + g.text);
  for (const auto& globs : f.ops) parts.push_back("op=" + join_globs(globs, ","));
  if (f.role_mask) {
    std::vector<std::string_view> names;
    for (uint8_t r = 0; r < 4; ++r)
      if (f.role_mask & (1u << r)) names.push_back(role_name(Role{r}));
    // An empty intersection (role=input role=output) has no list form; keep both clauses'
    // meaning by writing an impossible pair.
    parts.push_back(names.empty() ? "role=output role=input"
                                  : fmt::format("role={}", fmt::join(names, ",")));
  }
  if (f.dtype_mask) {
    std::vector<std::string_view> names;
    for (uint16_t code = 1; code < 32; ++code)
      if (dtype_valid(code) && (f.dtype_mask & (1u << code))) names.push_back(dtype_name(DType{code}));
    parts.push_back(names.empty() ? "dtype=f32 dtype=f64"
                                  : fmt::format("dtype={}", fmt::join(names, ",")));
  }
  for (const auto& p : f.rank) parts.push_back(fmt::format("rank{}{}", kCmpText[size_t(p.op)], p.value));
  for (const auto& p : f.numel) parts.push_back(fmt::format("numel{}{}", kCmpText[size_t(p.op)], p.value));
  for (const auto& d : f.dims) {
    std::string idx = d.any ? "" : fmt::format("[{}]", d.index);
    parts.push_back(fmt::format("dim{}{}{}", idx, kCmpText[size_t(d.pred.op)], d.pred.value));
  }
  for (uint64_t n : f.every) parts.push_back(fmt::format("every={}", n));
  if (f.budget) parts.push_back(fmt::format("budget={}", *f.budget));
  return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace driftscope
