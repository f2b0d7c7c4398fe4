// C ABI: the comparison engine (include/driftscope/compare.hpp, docs/compare.md). Options come as
// a JSON object whose keys mirror `driftscope compare`'s options (docs/c-api.md "Comparing"), so a
// binding passes one string instead of mirroring a struct that grows with every release.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "capi/capi_internal.hpp"
#include "compare/internal.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/report.hpp"

using namespace driftscope;
using nlohmann::json;

static_assert(DS_VERDICT_PASS == static_cast<int>(Verdict::pass));
static_assert(DS_VERDICT_DIVERGED == static_cast<int>(Verdict::diverged));
static_assert(DS_VERDICT_SILENT_FAILURE == static_cast<int>(Verdict::silent_failure));
static_assert(DS_VERDICT_NOTHING_COMPARED == static_cast<int>(Verdict::nothing_compared));

namespace {

enum class Format { json, text, markdown, html, model_explorer };

struct Request {
  CompareOptions options;
  Format format = Format::json;
};

// Only the JSON types are checked here; values go to CompareSettings::resolve(), the validator
// the CLI and Python use too, so ranges and their messages are the same in every front end.
Error bad_key(const std::string& key, const std::string& want) {
  return make_error(Errc::invalid_argument,
                    "compare option '" + key + "' must be " + want);
}

Result<double> number(const std::string& key, const json& v) {
  if (!v.is_number()) return bad_key(key, "a number");
  return v.get<double>();
}

Result<int64_t> integer(const std::string& key, const json& v) {
  if (v.is_number_integer() &&
      (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)))
    return v.get<int64_t>();
  return bad_key(key, "an integer");
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

// The keys are CompareSettings' fields (docs/c-api.md "Comparing").
Result<Request> parse_request(const char* text) {
  Request req;
  CompareSettings st;
  if (text && text[0] != '\0') {
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
      return make_error(Errc::invalid_argument, std::string("options_json is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) return make_error(Errc::invalid_argument, "options_json must be a JSON object");
    for (const auto& [key, v] : j.items()) {
      std::optional<double>* num = key == "atol"                    ? &st.atol
                                   : key == "rtol"                  ? &st.rtol
                                   : key == "max_mismatch_fraction" ? &st.max_mismatch_fraction
                                   : key == "min_cosine"            ? &st.min_cosine
                                   : key == "min_sqnr"              ? &st.min_sqnr
                                   : key == "max_rel_l2"            ? &st.max_rel_l2
                                   : key == "min_argmax"            ? &st.min_argmax
                                   : key == "min_topk"              ? &st.min_topk
                                   : key == "r64_floor"             ? &st.r64_floor
                                                                    : nullptr;
      int64_t* whole = key == "top_k"            ? &st.top_k
                       : key == "threads"        ? &st.threads
                       : key == "max_amplifiers" ? &st.max_amplifiers
                                                 : nullptr;
      bool* flag = key == "nan_equal"            ? &st.nan_equal
                   : key == "reshape"            ? &st.reshape
                   : key == "stop_at_first"      ? &st.stop_at_first
                   : key == "allow_unpaired"     ? &st.allow_unpaired
                   : key == "allow_incomparable" ? &st.allow_incomparable
                                                 : nullptr;
      std::string* str = key == "policy"        ? &st.policy
                         : key == "policy_text" ? &st.policy_text
                         : key == "map_file"    ? &st.map_file
                         : key == "pairs"       ? &st.pairs
                         : key == "filter"      ? &st.filter
                         : key == "reference64" ? &st.reference64
                                                : nullptr;
      std::vector<std::string>* list = key == "map_a"     ? &st.map_a
                                       : key == "map_b"   ? &st.map_b
                                       : key == "classes" ? &st.classes
                                       : key == "r64_k"   ? &st.r64_k
                                                          : nullptr;
      if (num) {
        DS_GET(d, number(key, v));
        *num = *d;
      } else if (whole) {
        DS_GET(n, integer(key, v));
        *whole = *n;
      } else if (flag) {
        DS_GET(b, boolean(key, v));
        *flag = *b;
      } else if (str) {
        DS_GET(s, text_value(key, v));
        *str = *s;
      } else if (list) {
        DS_GET(s, strings(key, v));
        *list = *s;
      } else if (key == "max_ulp") {
        DS_GET(n, integer(key, v));
        st.max_ulp = *n;
      } else if (key == "amplification_threshold") {
        DS_GET(d, number(key, v));
        st.amplification_threshold = *d;
      } else if (key == "exact") {
        if (!v.is_object()) return bad_key(key, "an object of \"reference name\": \"candidate name\"");
        for (const auto& [ref, cand] : v.items()) {
          if (!cand.is_string()) return bad_key(key, "an object of \"reference name\": \"candidate name\"");
          st.exact.emplace_back(ref, cand.get<std::string>());
        }
      } else if (key == "format") {
        DS_GET(s, text_value(key, v));
        if (*s == "json") req.format = Format::json;
        else if (*s == "text") req.format = Format::text;
        else if (*s == "markdown") req.format = Format::markdown;
        else if (*s == "html") req.format = Format::html;
        else if (*s == "model_explorer") req.format = Format::model_explorer;
        else return bad_key(key, "\"json\", \"text\", \"markdown\", \"html\" or \"model_explorer\"");
      } else {
        return make_error(Errc::invalid_argument,
                          "unknown compare option '" + key + "'");
      }
    }
  }
  auto o = st.resolve();
  if (!o) return std::move(o).error();
  req.options = std::move(*o);
  // The page's per-tensor detail (histogram, heatmap, worst elements) is computed in the pass.
  if (req.format == Format::html) req.options.details = true;
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
        case Format::html: text = report_to_html(*rep); break;
        case Format::model_explorer: text = report_to_model_explorer(*rep); break;
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
