// The `driftscope` command: each subcommand lives in its own cmd_<name>.cpp and registers itself
// here, so adding one touches no other file. Exit codes (like diff(1)): 0 fine / same,
// 1 different / damaged, 2 usage or input error, 3 silent failure (compare).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "driftscope/options.hpp"

namespace driftscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDifferent = 1;
inline constexpr int kExitTrouble = 2;
inline constexpr int kExitSilentFailure = 3;

// A subcommand adds itself to `app` and returns the function that runs it (after parsing).
struct CommandSpec {
  std::string name;
  int order;  // position in --help
  std::function<std::function<int()>(CLI::App& app)> setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSpec spec) { command_registry().push_back(std::move(spec)); }
};

// One row of an option table (driftscope/options.hpp) as a CLI11 option of `sub`, writing `var`.
// `checked`: the command's own options get their range and choices checked here; the library's
// settings are left to the library's validator, so a bad value gets the message every front end
// gives. Registration order is the rows' order, which is --help's (tests/cli holds it).
template <class T>
void add_table_option(CLI::App* sub, T& var, std::string_view flag, std::string_view help,
                      std::string_view group, bool checked, std::string_view choices, double lo, double hi) {
  if (flag.empty()) return;  // not on the command line (the C ABI's and Python's only)
  CLI::Option* o = nullptr;
  if constexpr (std::is_same_v<T, ExactNames>)
    return;  // no row of this type has a flag (it is the mapping file's [exact] table)
  else if constexpr (std::is_same_v<T, bool>)
    o = sub->add_flag(std::string(flag), var, std::string(help));
  else
    o = sub->add_option(std::string(flag), var, std::string(help));
  if constexpr (std::is_same_v<T, std::vector<std::string>>) o->allow_extra_args(false);
  o->group(std::string(group));
  if (!checked) return;
  if (!choices.empty()) {
    std::vector<std::string> allowed;
    for (size_t pos = 0; pos <= choices.size();) {
      size_t comma = std::min(choices.find(',', pos), choices.size());
      allowed.emplace_back(choices.substr(pos, comma - pos));
      pos = comma + 1;
    }
    o->check(CLI::IsMember(allowed));
  }
  if constexpr (std::is_same_v<T, std::optional<int64_t>> || std::is_same_v<T, int64_t>)
    if (lo != hi) o->check(CLI::Range(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
}

// Every row of a table macro (DRIFTSCOPE_COMPARE_SETTINGS, DRIFTSCOPE_CHECK_OPTIONS, ...) as a
// CLI11 option writing the field of that name in `object`.
#define DRIFTSCOPE_CLI_ROWS(TABLE, sub, object, checked) \
  do {                                                   \
    CLI::App* ds_sub_ = (sub);                           \
    auto& ds_object_ = (object);                         \
    const bool ds_checked_ = (checked);                  \
    TABLE(DRIFTSCOPE_CLI_ROW_)                           \
  } while (0)
#define DRIFTSCOPE_CLI_ROW_(type, name, def, flag, keyword, role, lo, hi, choices, group, help) \
  ::driftscope::cli::add_table_option(ds_sub_, ds_object_.name, flag, help, group, ds_checked_, choices, lo, hi);

}  // namespace driftscope::cli

#define DRIFTSCOPE_COMMAND(name, order, setup_fn) \
  static ::driftscope::cli::CommandRegistrar ds_command_registrar_##name({#name, order, setup_fn})
