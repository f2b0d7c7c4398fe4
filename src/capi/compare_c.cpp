// C ABI: the comparison engine (include/driftscope/compare.hpp, docs/compare.md). Options come as
// a JSON object whose keys mirror `driftscope compare`'s options (docs/c-api.md "Comparing"), so a
// binding passes one string instead of mirroring a struct that grows with every release.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "capi/capi_internal.hpp"
#include "driftscope/compare.hpp"

using namespace driftscope;
using nlohmann::json;

static_assert(DS_VERDICT_PASS == static_cast<int>(Verdict::pass));
static_assert(DS_VERDICT_DIVERGED == static_cast<int>(Verdict::diverged));
static_assert(DS_VERDICT_SILENT_FAILURE == static_cast<int>(Verdict::silent_failure));
static_assert(DS_VERDICT_NOTHING_COMPARED == static_cast<int>(Verdict::nothing_compared));

namespace {

enum class Format { json, text, markdown };

struct Request {
  CompareOptions options;
  Format format = Format::json;
};

Error bad_key(const std::string& key, const std::string& want) {
  return make_error(Errc::invalid_argument, "compare option '" + key + "' must be " + want);
}

Result<double> number(const std::string& key, const json& v) {
  if (!v.is_number()) return bad_key(key, "a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) return bad_key(key, "a finite number");
  return d;
}

Result<double> non_negative(const std::string& key, const json& v) {
  auto d = number(key, v);
  if (d && *d < 0) return bad_key(key, "a number >= 0");
  return d;
}

Result<uint64_t> integer(const std::string& key, const json& v, uint64_t lo, uint64_t hi) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    uint64_t u = v.get<uint64_t>();
    if (u >= lo && u <= hi) return u;
  }
  return bad_key(key, "an integer in " + std::to_string(lo) + " ... " + std::to_string(hi));
}

Result<bool> boolean(const std::string& key, const json& v) {
  if (!v.is_boolean()) return bad_key(key, "true or false");
  return v.get<bool>();
}

Result<std::string> text_value(const std::string& key, const json& v) {
  if (!v.is_string()) return bad_key(key, "a string");
  return v.get<std::string>();
}

Result<std::vector<std::string>> strings(const std::string& key, const json& v) {
  if (!v.is_array()) return bad_key(key, "an array of strings");
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) return bad_key(key, "an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

#define DS_GET(var, expr)          \
  auto var = (expr);               \
  if (!var) return std::move(var).error()

// Mirrors cli/cmd_compare.cpp: the same keys mean the same policy from C as from the command line.
Result<Request> parse_request(const char* text) {
  Request req;
  if (!text || text[0] == '\0') return req;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return make_error(Errc::invalid_argument, std::string("options_json is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return make_error(Errc::invalid_argument, "options_json must be a JSON object");

  CompareOptions& o = req.options;
  Criteria crit;
  std::vector<std::string> classes;
  uint32_t top_k = 5;
  std::string policy_file, policy_text, map_file;
  std::vector<std::string> map_a, map_b;
  for (const auto& [key, v] : j.items()) {
    if (key == "atol") { DS_GET(d, non_negative(key, v)); crit.atol = *d; }
    else if (key == "rtol") { DS_GET(d, non_negative(key, v)); crit.rtol = *d; }
    else if (key == "max_mismatch_fraction") { DS_GET(d, non_negative(key, v)); crit.max_mismatch_fraction = *d; }
    else if (key == "min_cosine") {
      DS_GET(d, number(key, v));
      if (*d < -1 || *d > 1) return bad_key(key, "in -1 ... 1");
      crit.min_cosine = *d;
    }
    else if (key == "min_sqnr") { DS_GET(d, number(key, v)); crit.min_sqnr_db = *d; }
    else if (key == "max_rel_l2") { DS_GET(d, non_negative(key, v)); crit.max_rel_l2 = *d; }
    else if (key == "max_ulp") {
      DS_GET(n, integer(key, v, 0, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
      crit.max_ulp = static_cast<int64_t>(*n);
    }
    else if (key == "min_argmax" || key == "min_topk") {
      DS_GET(d, number(key, v));
      if (*d < 0 || *d > 1) return bad_key(key, "in 0 ... 1");
      (key == "min_argmax" ? crit.min_argmax_agreement : crit.min_topk_overlap) = *d;
    }
    else if (key == "policy") { DS_GET(s, text_value(key, v)); policy_file = *s; }
    else if (key == "policy_text") { DS_GET(s, text_value(key, v)); policy_text = *s; }
    else if (key == "nan_equal") { DS_GET(b, boolean(key, v)); o.nan_equal = *b; }
    else if (key == "reshape") { DS_GET(b, boolean(key, v)); o.reshape = *b; }
    else if (key == "stop_at_first") { DS_GET(b, boolean(key, v)); o.stop_at_first = *b; }
    else if (key == "allow_unpaired") { DS_GET(b, boolean(key, v)); o.allow_unpaired = *b; }
    else if (key == "allow_incomparable") { DS_GET(b, boolean(key, v)); o.allow_incomparable = *b; }
    else if (key == "map_a") { DS_GET(s, strings(key, v)); map_a = *s; }
    else if (key == "map_b") { DS_GET(s, strings(key, v)); map_b = *s; }
    else if (key == "map_file") { DS_GET(s, text_value(key, v)); map_file = *s; }
    else if (key == "pairs") {
      DS_GET(s, text_value(key, v));
      if (*s != "name" && *s != "positional") return bad_key(key, "\"name\" or \"positional\"");
      o.pairing = *s == "positional" ? Pairing::positional : Pairing::by_name;
    }
    else if (key == "filter") { DS_GET(s, text_value(key, v)); o.filter = *s; }
    else if (key == "classes") { DS_GET(s, strings(key, v)); classes = *s; }
    else if (key == "top_k") { DS_GET(n, integer(key, v, 1, 1000)); top_k = static_cast<uint32_t>(*n); }
    else if (key == "reference64") { DS_GET(s, text_value(key, v)); o.reference64 = *s; }
    else if (key == "threads") { DS_GET(n, integer(key, v, 0, 4096)); o.threads = static_cast<unsigned>(*n); }
    else if (key == "format") {
      DS_GET(s, text_value(key, v));
      if (*s == "json") req.format = Format::json;
      else if (*s == "text") req.format = Format::text;
      else if (*s == "markdown") req.format = Format::markdown;
      else return bad_key(key, "\"json\", \"text\" or \"markdown\"");
    }
    else return make_error(Errc::invalid_argument, "unknown compare option '" + key + "'");
  }

  if (!policy_file.empty() && !policy_text.empty())
    return make_error(Errc::invalid_argument, "give either 'policy' (a path) or 'policy_text', not both");
  if (!policy_file.empty()) {
    auto p = Policy::load(policy_file);
    if (!p) return std::move(p).error();
    o.policy = std::move(*p);
  } else if (!policy_text.empty()) {
    auto p = Policy::parse(policy_text, "policy_text");
    if (!p) return std::move(p).error();
    o.policy = std::move(*p);
  }
  if (crit.max_mismatch_fraction && !crit.uses_allclose())
    return make_error(Errc::invalid_argument,
                      "compare option 'max_mismatch_fraction' needs 'atol' or 'rtol' (it loosens the allclose rule)");
  // Criteria given here replace the defaults (and a policy's [default]) as a whole, as on the CLI.
  if (!crit.empty()) o.policy.global = crit;
  for (const auto& g : classes) {
    PolicyRule r;
    r.match = g;
    r.classes = true;
    r.top_k = top_k;
    o.policy.rules.push_back(r);
  }
  if (crit.min_argmax_agreement || crit.min_topk_overlap) {
    PolicyRule r;
    r.classes = true;
    r.top_k = top_k;
    o.policy.rules.push_back(r);
  }
  if (!map_file.empty()) {
    auto m = NameMap::load(map_file);
    if (!m) return std::move(m).error();
    o.names = std::move(*m);
  }
  for (const auto& s : map_a) {
    auto r = RenameRule::parse(s);
    if (!r) return std::move(r).error();
    o.names.reference.push_back(*r);
  }
  for (const auto& s : map_b) {
    auto r = RenameRule::parse(s);
    if (!r) return std::move(r).error();
    o.names.candidate.push_back(*r);
  }
  return req;
}

#undef DS_GET

}  // namespace

extern "C" {

int ds_compare(const char* reference_path, const char* candidate_path, const char* options_json,
               char** report, size_t* report_length) {
  return capi::guarded([&]() -> int {
    if (report) *report = nullptr;
    if (report_length) *report_length = 0;
    if (!reference_path) return capi::fail_null("reference_path");
    if (!candidate_path) return capi::fail_null("candidate_path");
    auto req = parse_request(options_json);
    if (!req) return capi::fail(req.error());
    auto rep = compare_files(reference_path, candidate_path, req->options);
    if (!rep) return capi::fail(rep.error());
    if (report) {
      std::string text;
      switch (req->format) {
        case Format::json: text = report_to_json(*rep); break;
        case Format::text: text = report_to_text(*rep); break;
        case Format::markdown: text = report_to_markdown(*rep); break;
      }
      // malloc, not new[]: the caller may hand it to any C code; ds_string_free is free().
      char* out = static_cast<char*>(std::malloc(text.size() + 1));
      if (!out) return capi::fail(DS_E_OUT_OF_MEMORY, "out of memory for the report text");
      std::memcpy(out, text.c_str(), text.size() + 1);
      *report = out;
      if (report_length) *report_length = text.size();
    }
    return static_cast<int>(rep->verdict);
  });
}

void ds_string_free(char* s) { std::free(s); }

}  // extern "C"
