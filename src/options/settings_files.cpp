// The settings files compare reads: policy files (Policy::parse/load: [default], [[rule]],
// [reference64]) and mapping files and rename rules (NameMap, RenameRule), from the JSON values
// config/config_text.cpp reads (docs/compare.md "Tolerance policy", "Pairing"). They are the
// options layer's: CompareSettings::resolve() (option_validate.cpp) is what reads them, and the
// engine only gets the resolved Policy and NameMap. The criteria's ranges are policy.cpp's
// (compare_detail::kCriteria), one table for files and options.
#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "compare/internal.hpp"
#include "driftscope/limits.hpp"

namespace driftscope {

using nlohmann::json;
using compare_detail::kMaxConfigBytes;
using compare_detail::parse_config;
using compare_detail::read_text_file;

namespace {

constexpr size_t kMaxRegexLength = limits::kMaxNameLength;
constexpr size_t kMaxRegexNesting = 32;
// libstdc++ reads a back-reference (\N) or a repeat count ({N,M}) into a long without an overflow
// test (undefined behaviour past 18 digits, found by fuzz_name_map_parse); no name needs more
// than 9, and its own limit on NFA states bounds what a smaller count can build.
constexpr size_t kMaxRegexNumber = 9;

Error policy_error(std::string_view origin, std::string msg) {
  return make_error(Errc::bad_policy, fmt::format("{}: {}", origin, msg));
}

Error rule_error(std::string msg) {
  return make_error(Errc::invalid_argument, msg);
}

Result<double> get_number(const json& v, std::string_view origin, std::string_view key, double lo,
                          double hi) {
  if (!v.is_number()) return policy_error(origin, fmt::format("'{}' must be a number", key));
  double d = v.get<double>();
  if (auto problem = compare_detail::range_problem(key, d, lo, hi); !problem.empty())
    return policy_error(origin, problem);
  return d;
}

// Reads the criteria keys of `obj` (other keys are left to the caller); nullopt when none.
Result<std::optional<Criteria>> criteria_from_json(const json& obj, std::string_view origin,
                                                   std::vector<std::string>& used) {
  Criteria c;
  bool any = false;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    const compare_detail::CriterionSpec* spec = nullptr;
    for (const auto& s : compare_detail::kCriteria)
      if (k == s.key || k == s.option) spec = &s;
    if (spec) {
      auto r = get_number(v, origin, k, spec->lo, spec->hi);
      if (!r) return std::move(r).error();
      c.*(spec->member) = *r;
      any = true;
      used.push_back(k);
    } else if (k == "max_ulp") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return policy_error(origin, "'max_ulp' must be a non-negative integer");
      c.max_ulp = v.get<int64_t>();
      any = true;
      used.push_back(k);
    }
  }
  if (!any) return std::optional<Criteria>{};
  return std::optional<Criteria>{c};
}

Result<void> reject_unknown(const json& obj, std::string_view origin, std::string_view where,
                            const std::vector<std::string>& used,
                            std::initializer_list<std::string_view> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    if (std::find(used.begin(), used.end(), k) != used.end()) continue;
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    return policy_error(origin, fmt::format("unknown key '{}' in {}", k, where));
  }
  return {};
}

}  // namespace

// ---- policy files -------------------------------------------------------------------------------

Result<Policy> Policy::parse(std::string_view text, std::string_view origin) {
  auto parsed = parse_config(text, origin);
  if (!parsed) return std::move(parsed).error();
  const json& root = *parsed;
  if (!root.is_object()) return policy_error(origin, "the top level must be a table/object");
  Policy p;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "version") {
      if (!v.is_number_integer() || v.get<int64_t>() != 1)
        return policy_error(origin, "'version' must be 1");
    } else if (key == "default") {
      if (!v.is_object()) return policy_error(origin, "'default' must be a table");
      std::vector<std::string> used;
      auto c = criteria_from_json(v, origin, used);
      if (!c) return std::move(c).error();
      DRIFTSCOPE_TRY(reject_unknown(v, origin, "[default]", used, {}));
      p.global = c->value_or(Criteria{});
    } else if (key == "rule" || key == "rules") {
      if (!v.is_array()) return policy_error(origin, fmt::format("'{}' must be an array of tables", key));
      for (size_t i = 0; i < v.size(); ++i) {
        const json& r = v[i];
        std::string where = fmt::format("rule {}", p.rules.size() + 1);
        if (!r.is_object()) return policy_error(origin, where + " must be a table");
        PolicyRule rule;
        std::vector<std::string> used;
        auto c = criteria_from_json(r, origin, used);
        if (!c) return std::move(c).error();
        rule.criteria = *c;
        if (r.contains("match")) {
          if (!r["match"].is_string() || r["match"].get<std::string>().empty())
            return policy_error(origin, where + ": 'match' must be a non-empty glob string");
          rule.match = r["match"].get<std::string>();
        }
        if (r.contains("op")) {
          if (!r["op"].is_string()) return policy_error(origin, where + ": 'op' must be a string");
          rule.op = r["op"].get<std::string>();
        }
        if (!r.contains("match") && !r.contains("op"))
          return policy_error(origin, where + " needs 'match' (a name glob) or 'op'");
        if (r.contains("skip")) {
          if (!r["skip"].is_boolean()) return policy_error(origin, where + ": 'skip' must be true or false");
          rule.skip = r["skip"].get<bool>();
        }
        if (r.contains("classes")) {
          if (!r["classes"].is_boolean())
            return policy_error(origin, where + ": 'classes' must be true or false");
          rule.classes = r["classes"].get<bool>();
        }
        if (r.contains("top_k")) {
          if (!r["top_k"].is_number_integer() || r["top_k"].get<int64_t>() < 1 ||
              r["top_k"].get<int64_t>() > 1000)
            return policy_error(origin, where + ": 'top_k' must be an integer 1 .. 1000");
          rule.top_k = static_cast<uint32_t>(r["top_k"].get<int64_t>());
          rule.classes = true;
        }
        if ((rule.criteria && (rule.criteria->min_argmax_agreement || rule.criteria->min_topk_overlap)))
          rule.classes = true;
        DRIFTSCOPE_TRY(reject_unknown(r, origin, where, used, {"match", "op", "skip", "classes", "top_k"}));
        p.rules.push_back(std::move(rule));
      }
    } else if (key == "reference64") {
      if (!v.is_object()) return policy_error(origin, "'reference64' must be a table");
      for (auto jt = v.begin(); jt != v.end(); ++jt) {
        if (jt.key() == "floor") {
          auto f = get_number(jt.value(), origin, "reference64.floor", 0, 1e12);
          if (!f) return std::move(f).error();
          p.r64_floor = *f;
        } else if (jt.key() == "k") {
          if (!jt.value().is_object())
            return policy_error(origin, "'reference64.k' must be a table of dtype = number");
          for (auto kt = jt.value().begin(); kt != jt.value().end(); ++kt) {
            auto dt = parse_dtype(kt.key());
            if (!dt) return policy_error(origin, fmt::format("unknown dtype '{}' in reference64.k", kt.key()));
            auto k = get_number(kt.value(), origin, "reference64.k." + kt.key(), 0, 1e12);
            if (!k) return std::move(k).error();
            p.r64_k.emplace_back(*dt, *k);
          }
        } else {
          return policy_error(origin, fmt::format("unknown key '{}' in [reference64]", jt.key()));
        }
      }
    } else {
      return policy_error(origin, fmt::format("unknown key '{}' (expected version, default, rule, reference64)", key));
    }
  }
  return p;
}

Result<Policy> Policy::load(const std::string& path) {
  auto text = read_text_file(path, kMaxConfigBytes);
  if (!text) return std::move(text).error();
  return parse(*text, path);
}

// ---- rename rules -------------------------------------------------------------------------------

Result<RenameRule> RenameRule::parse(std::string_view text) {
  size_t arrow = text.find("=>");
  if (arrow == std::string_view::npos)
    return rule_error(fmt::format("rename rule '{}' has no '=>' (expected REGEX=>REPLACEMENT)", text));
  RenameRule r{std::string(text.substr(0, arrow)), std::string(text.substr(arrow + 2))};
  if (r.pattern.empty())
    return rule_error(fmt::format("rename rule '{}' has an empty regex", text));
  // std::regex compiles and matches recursively: a pattern nested thousands of groups deep
  // overflows the stack. Names are at most limits::kMaxNameLength bytes; so are patterns.
  if (r.pattern.size() > kMaxRegexLength)
    return make_error(Errc::invalid_argument,
                      fmt::format("rename rule regex is {} bytes, allowed 1 .. {}", r.pattern.size(),
                                  kMaxRegexLength));
  size_t depth = 0;
  bool in_class = false, in_braces = false;
  for (size_t i = 0; i < r.pattern.size(); ++i) {
    char c = r.pattern[i];
    // The digits that std::regex reads as one number: after '\\', '{' or a ',' inside braces.
    if (c == '\\' || (!in_class && (c == '{' || (in_braces && c == ',')))) {
      size_t j = i + 1;
      while (j < r.pattern.size() && r.pattern[j] >= '0' && r.pattern[j] <= '9') ++j;
      if (j - i - 1 > kMaxRegexNumber)
        return make_error(Errc::invalid_argument,
                          fmt::format("rename rule regex has a number of more than {} digits (at byte {})",
                                      kMaxRegexNumber, i + 1));
    }
    if (!in_class && c == '{') in_braces = true;
    if (!in_class && c == '}') in_braces = false;
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;  // ECMAScript: the first unescaped ']' closes a class, even "[]"
    } else if (c == '(') {
      if (++depth > kMaxRegexNesting)
        return make_error(Errc::invalid_argument,
                          fmt::format("rename rule regex nests groups more than {} deep (at byte {})",
                                      kMaxRegexNesting, i));
    } else if (c == ')' && depth > 0) {
      --depth;
    }
  }
  try {
    std::regex re(r.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return rule_error(fmt::format("rename rule '{}': invalid regex: {}", text, e.what()));
  }
  return r;
}

Result<NameMap> NameMap::parse(std::string_view text, std::string_view origin) {
  auto parsed = parse_config(text, origin);
  if (!parsed) return std::move(parsed).error();
  const json& root = *parsed;
  if (!root.is_object()) return policy_error(origin, "the top level must be a table/object");
  NameMap m;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "a" || key == "b" || key == "reference" || key == "candidate") {
      if (!v.is_array()) return policy_error(origin, fmt::format("'{}' must be an array of \"REGEX=>REPL\" strings", key));
      auto& dst = (key == "a" || key == "reference") ? m.reference : m.candidate;
      for (const auto& s : v) {
        if (!s.is_string()) return policy_error(origin, fmt::format("'{}' must hold strings", key));
        auto r = RenameRule::parse(s.get<std::string>());
        if (!r) return policy_error(origin, r.error().message);
        dst.push_back(*r);
      }
    } else if (key == "exact") {
      if (!v.is_object()) return policy_error(origin, "'exact' must be a table of \"reference name\" = \"candidate name\"");
      for (auto jt = v.begin(); jt != v.end(); ++jt) {
        if (!jt.value().is_string())
          return policy_error(origin, fmt::format("exact.'{}' must be a string", jt.key()));
        m.exact.emplace_back(jt.key(), jt.value().get<std::string>());
      }
    } else if (key != "version") {
      return policy_error(origin, fmt::format("unknown key '{}' (expected a, b, exact)", key));
    }
  }
  return m;
}

Result<NameMap> NameMap::load(const std::string& path) {
  auto text = read_text_file(path, kMaxConfigBytes);
  if (!text) return std::move(text).error();
  return parse(*text, path);
}

}  // namespace driftscope
