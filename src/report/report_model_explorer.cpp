// Model Explorer node data (google-ai-edge/model-explorer, python/model_explorer/
// node_data_builder.py, class GraphNodeData): {"name", "results": {key: {"value", "bgColor"}},
// "thresholds"}. A key is matched against a node's output tensor names (its outputsMetadata
// "tensor_name") or its node id; driftscope's tensor names are those output names for the ONNX
// Runtime and LiteRT recorders, so the overlay lands on the node that produced each tensor.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/internal.hpp"
#include "driftscope/report.hpp"

namespace driftscope {
namespace {

// log10 of the relative L2 error, clamped so that it is a JSON number: exact pairs -16, a new
// NaN/Inf +6 (worse than any finite error a run can show and still be called close).
constexpr double kExactValue = -16.0;
constexpr double kNonfiniteValue = 6.0;

double value_of(const PairResult& p) {
  if (!std::isfinite(p.error)) return kNonfiniteValue;
  if (p.error <= 0) return kExactValue;
  return std::clamp(std::log10(p.error), kExactValue, kNonfiniteValue);
}

// Status colours of the other reports; an introduced divergence is drawn darker than an inherited
// one, so the node that broke stands out from the nodes that merely carry its error.
const char* colour_of(const PairResult& p) {
  switch (p.status) {
    case PairStatus::pass: return "#bfe3c8";
    case PairStatus::fail: return p.origin == Origin::introduced ? "#e07b00" : "#ffd39a";
    case PairStatus::silent_failure: return p.origin == Origin::introduced ? "#d21f3c" : "#f4a3b0";
    default: return "#d5d8dd";
  }
}

int severity(PairStatus s) {
  switch (s) {
    case PairStatus::silent_failure: return 3;
    case PairStatus::fail: return 2;
    case PairStatus::pass: return 1;
    default: return 0;
  }
}

}  // namespace

std::string report_to_model_explorer(const Report& report) {
  // One entry per tensor name: a node run more than once (occurrences) shows its worst pair (the
  // first of equally bad ones). Sorted by name, which is the order the document shows them in.
  // ordered_json's operator[] looks each key up in a vector, which made 80k names take 10 s: the
  // unique names are appended to the ordered map's underlying vector instead.
  std::vector<std::pair<std::string_view, const PairResult*>> outputs;
  for (const PairResult& p : report.pairs)
    if (p.compared && p.ref.role == Role::output) outputs.emplace_back(p.ref.name(), &p);
  std::stable_sort(outputs.begin(), outputs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::ordered_json results = nlohmann::ordered_json::object();
  auto& entries = results.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(outputs.size());
  for (size_t i = 0, j = 0; i < outputs.size(); i = j) {
    const PairResult* worst = outputs[i].second;
    for (j = i + 1; j < outputs.size() && outputs[j].first == outputs[i].first; ++j) {
      const PairResult& p = *outputs[j].second;
      if (severity(p.status) > severity(worst->status) ||
          (severity(p.status) == severity(worst->status) && value_of(p) > value_of(*worst)))
        worst = &p;
    }
    entries.emplace_back(std::string(outputs[i].first),
                         nlohmann::ordered_json{{"value", value_of(*worst)}, {"bgColor", colour_of(*worst)}});
  }
  nlohmann::ordered_json o;
  o["name"] = "driftscope: log10 relative L2 error";
  o["results"] = std::move(results);
  // Used where a node has no bgColor of its own (none here, but Model Explorer's legend shows it).
  o["thresholds"] = nlohmann::ordered_json::array({
      {{"value", -6}, {"bgColor", "#bfe3c8"}},
      {{"value", -3}, {"bgColor", "#ffe8a3"}},
      {{"value", -1}, {"bgColor", "#ffd39a"}},
      {{"value", kNonfiniteValue}, {"bgColor", "#f4a3b0"}}});
  return o.dump(2, ' ', false, nlohmann::detail::error_handler_t::replace) + "\n";
}

}  // namespace driftscope
