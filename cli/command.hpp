// The `driftscope` command: each subcommand lives in its own cmd_<name>.cpp and registers itself
// here, so adding one touches no other file. Exit codes (like diff(1)): 0 fine / same,
// 1 different / damaged, 2 usage or input error, 3 silent failure (compare).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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

}  // namespace driftscope::cli

#define DRIFTSCOPE_COMMAND(name, order, setup_fn) \
  static ::driftscope::cli::CommandRegistrar ds_command_registrar_##name({#name, order, setup_fn})
