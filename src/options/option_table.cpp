// The rows of compare_options.hpp as data, and everything done by them: the settings JSON (the C
// ABI's options, the command's hand-over to the Ray engine) and the command's file rules.
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "options/option_json.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/compare_options.hpp"
#include "driftscope/file.hpp"

namespace driftscope {
namespace {

using nlohmann::json;

constexpr OptionSpec kSpecs[] = {DRIFTSCOPE_COMPARE_SETTINGS(DRIFTSCOPE_OPTION_SETTINGS_SPEC_)
                                     DRIFTSCOPE_COMPARE_COMMAND(DRIFTSCOPE_OPTION_COMMAND_SPEC_)};

Error bad_key(const std::string& key, const char* want) {
  return make_error(Errc::invalid_argument, "compare option '" + key + "' must be " + want);
}

// JSON has no infinity or NaN: they travel as these strings (compare_options_to_json).
std::optional<double> non_finite(const json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "inf") return HUGE_VAL;
  if (s == "-inf") return -HUGE_VAL;
  if (s == "nan") return std::nan("");
  return std::nullopt;
}

Result<void> assign(const std::string& key, const json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return {};
  }
  if (auto d = non_finite(v)) {
    out = *d;
    return {};
  }
  return bad_key(key, "a number");
}

Result<void> assign(const std::string& key, const json& v, int64_t& out) {
  if (v.is_number_integer() &&
      (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))) {
    out = v.get<int64_t>();
    return {};
  }
  return bad_key(key, "an integer");
}

template <class T>
Result<void> assign(const std::string& key, const json& v, std::optional<T>& out) {
  if (v.is_null()) {
    out.reset();
    return {};
  }
  T x{};
  DRIFTSCOPE_TRY(assign(key, v, x));
  out = x;
  return {};
}

Result<void> assign(const std::string& key, const json& v, bool& out) {
  if (!v.is_boolean()) return bad_key(key, "true or false");
  out = v.get<bool>();
  return {};
}

Result<void> assign(const std::string& key, const json& v, std::string& out) {
  if (!v.is_string()) return bad_key(key, "a string");
  out = v.get<std::string>();
  return {};
}

Result<void> assign(const std::string& key, const json& v, std::vector<std::string>& out) {
  if (!v.is_array()) return bad_key(key, "an array of strings");
  std::vector<std::string> list;
  for (const json& e : v) {
    if (!e.is_string()) return bad_key(key, "an array of strings");
    list.push_back(e.get<std::string>());
  }
  out = std::move(list);
  return {};
}

Result<void> assign(const std::string& key, const json& v, ExactNames& out) {
  const char* want = "an object of \"reference name\": \"candidate name\"";
  if (!v.is_object()) return bad_key(key, want);
  for (const auto& [ref, cand] : v.items()) {
    if (!cand.is_string()) return bad_key(key, want);
    out.emplace_back(ref, cand.get<std::string>());
  }
  return {};
}

json to_value(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}
json to_value(int64_t n) { return n; }
json to_value(bool b) { return b; }
json to_value(const std::string& s) { return s; }
json to_value(const std::vector<std::string>& v) { return v; }
json to_value(const ExactNames& v) {
  json o = json::object();
  for (const auto& [a, b] : v) o[a] = b;
  return o;
}
template <class T>
json to_value(const std::optional<T>& v) {
  return v ? to_value(*v) : json(nullptr);
}

// An input or output file row's value, by its role (the rows of other roles add nothing).
struct Out {
  std::string_view flag;
  const std::string* path;
};
template <OptionRole role, OptionRole want, class T>
void add_if(std::vector<std::string>& inputs, const T& value, std::string_view) {
  if constexpr (role == want) {
    if (!value.empty()) inputs.push_back(value);
  }
}
template <OptionRole role, OptionRole want, class T>
void add_if(std::vector<Out>& outputs, const T& value, std::string_view flag) {
  if constexpr (role == want) outputs.push_back({flag, &value});
}

}  // namespace

std::span<const OptionSpec> compare_option_specs() noexcept { return kSpecs; }

const OptionSpec* find_compare_option(std::string_view name) noexcept {
  for (const OptionSpec& s : kSpecs)
    if (s.name == name) return &s;
  return nullptr;
}

std::string_view option_type_name(OptionType t) noexcept {
  switch (t) {
    case OptionType::number: return "number";
    case OptionType::optional_number: return "optional_number";
    case OptionType::integer: return "integer";
    case OptionType::optional_integer: return "optional_integer";
    case OptionType::flag: return "flag";
    case OptionType::text: return "text";
    case OptionType::list: return "list";
    case OptionType::names: return "names";
  }
  return "?";
}

namespace compare_detail {

Result<void> set_option(CompareSettings& settings, CompareCommandOptions* command,
                        const std::string& key, const json& value) {
#define DS_SET_SETTING_(type, name, ...) \
  if (key == #name) return assign(key, value, settings.name);
#define DS_SET_COMMAND_(type, name, ...) \
  if (command && key == #name) return assign(key, value, command->name);
  DRIFTSCOPE_COMPARE_SETTINGS(DS_SET_SETTING_)
  DRIFTSCOPE_COMPARE_COMMAND(DS_SET_COMMAND_)
#undef DS_SET_SETTING_
#undef DS_SET_COMMAND_
  return make_error(Errc::invalid_argument, "unknown compare option '" + key + "'");
}

}  // namespace compare_detail

std::string compare_options_to_json(const CompareSettings& settings,
                                    const CompareCommandOptions* command) {
  json j = json::object();
#define DS_GET_SETTING_(type, name, ...) j[#name] = to_value(settings.name);
#define DS_GET_COMMAND_(type, name, ...) j[#name] = to_value(command->name);
  DRIFTSCOPE_COMPARE_SETTINGS(DS_GET_SETTING_)
  if (command) {
    DRIFTSCOPE_COMPARE_COMMAND(DS_GET_COMMAND_)
  }
#undef DS_GET_SETTING_
#undef DS_GET_COMMAND_
  return j.dump();
}

Result<void> compare_options_from_json(std::string_view json_object, CompareSettings& settings,
                                       CompareCommandOptions* command) {
  json j;
  try {
    j = json::parse(json_object);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
    return make_error(Errc::invalid_argument, std::string("compare options are not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return make_error(Errc::invalid_argument, "compare options must be a JSON object");
  for (const auto& [key, v] : j.items())
    DRIFTSCOPE_TRY(compare_detail::set_option(settings, command, key, v));
  return {};
}

std::vector<std::string> compare_inputs(const std::string& reference, const std::string& candidate,
                                        const CompareSettings& settings) {
  std::vector<std::string> inputs = {reference, candidate};
#define DS_INPUT_(type, name, def, flag, keyword, role, ...) \
  add_if<OptionRole::role, OptionRole::input_file>(inputs, settings.name, "");
  DRIFTSCOPE_COMPARE_SETTINGS(DS_INPUT_)
#undef DS_INPUT_
  return inputs;
}

Result<void> check_compare_outputs(const std::string& reference, const std::string& candidate,
                                   const CompareSettings& settings,
                                   const CompareCommandOptions& command) {
  const std::vector<std::string> inputs = compare_inputs(reference, candidate, settings);
  std::vector<Out> outputs;
#define DS_OUTPUT_(type, name, def, flag, keyword, role, ...) \
  add_if<OptionRole::role, OptionRole::output_file>(outputs, command.name, flag);
  DRIFTSCOPE_COMPARE_COMMAND(DS_OUTPUT_)
#undef DS_OUTPUT_
  // Refused before the comparison runs, not after it spent minutes: a report path that names an
  // input (the same inode: a symlink or hard link too) would replace that dump.
  for (const Out& o : outputs)
    if (!o.path->empty() && *o.path != "-") DRIFTSCOPE_TRY(refuse_input_as_output(*o.path, inputs));
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[i].path->empty() && *outputs[i].path == *outputs[j].path && *outputs[i].path != "-")
        return make_error(Errc::invalid_argument,
                          fmt::format("{} and {} both name {}; give each report its own file",
                                      outputs[i].flag, outputs[j].flag, *outputs[i].path));
  size_t to_stdout = 0;
  for (const Out& o : outputs) to_stdout += *o.path == "-";
  if (to_stdout > 1) return make_error(Errc::invalid_argument, "only one report can go to stdout ('-')");
  return {};
}

}  // namespace driftscope
