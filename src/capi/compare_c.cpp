// C ABI: the comparison engine (include/driftscope/compare.hpp, docs/compare.md). Options come as
// a JSON object whose keys mirror `driftscope compare`'s options (docs/c-api.md "Comparing"), so a
// binding passes one string instead of mirroring a struct that grows with every release.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "capi/capi_internal.hpp"
#include "driftscope/compare_options.hpp"
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

Error bad_key(const std::string& key, const std::string& want) {
  return make_error(Errc::invalid_argument,
                    "compare option '" + key + "' must be " + want);
}

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
      if (key != "format") {
        // The rows of compare_options.hpp: only the JSON types are checked here; values go to
        // CompareSettings::resolve(), the validator the CLI and Python use too. One key at a
        // time through the public compare_options_from_json, so that the first bad key, in key
        // order, is the one reported and the C ABI needs no library internals (a shared
        // libdriftscope exports only the public API). dump() writes numbers in their shortest
        // round-trip form: the value parsed back is the one given.
        if (auto set = compare_options_from_json(json::object({{key, v}}).dump(), st); !set) return std::move(set).error();
      } else {
        if (!v.is_string()) return bad_key(key, "a string");
        const std::string s = v.get<std::string>();
        if (s == "json") req.format = Format::json;
        else if (s == "text") req.format = Format::text;
        else if (s == "markdown") req.format = Format::markdown;
        else if (s == "html") req.format = Format::html;
        else if (s == "model_explorer") req.format = Format::model_explorer;
        else return bad_key(key, "\"json\", \"text\", \"markdown\", \"html\" or \"model_explorer\"");
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
