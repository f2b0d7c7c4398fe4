// driftscope command-line entry point: builds the CLI11 app from the registered subcommands.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "command.hpp"
#include "driftscope/simd.hpp"

namespace {
// A dump set keeps each rank's file open while it is read (MappedFile::check_unchanged), and a
// comparison opens two sets of up to 4,096 ranks (kMaxWorldSize): the soft descriptor limit,
// often 1,024, is raised to the hard one for this process, as a file server would.
void raise_descriptor_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? std::max<rlim_t>(rl.rlim_cur, 1u << 16)
                                             : rl.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &rl);
}
}  // namespace

namespace driftscope::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace driftscope::cli

int main(int argc, char** argv) {
  using namespace driftscope::cli;
  raise_descriptor_limit();
  if (auto simd = driftscope::use_simd_target_from_env(); !simd) {
    std::fprintf(stderr, "driftscope: error: %s\n", simd.error().message.c_str());
    return kExitTrouble;
  }
  CLI::App app{
      "driftscope: record the intermediate tensors of two runs of a model and find the first\n"
      "tensor where they part ways.\n\n"
      "Exit codes: 0 ok/same, 1 different or damaged, 2 usage or input error,\n"
      "3 silent failure (NaN/Inf, zero or constant output where the reference is healthy).\n",
      "driftscope"};
  app.footer(R"HELP(
Examples:
  driftscope record onnx model.onnx --input x=x.npy -o cpu.tdump    record a run
  driftscope ls cpu.tdump                        what was recorded, with statistics
  driftscope compare cpu.tdump gpu.tdump         where do two runs part ways?
  driftscope verify gpu.tdump                    is a dump intact?
  driftscope import saved.npz saved.tdump        compare tensors saved with numpy too

Environment:
  DRIFTSCOPE_PYTHON   the Python that record, guard and the other Python-backed subcommands
                      run (else the one next to this command, then python3 on PATH)
  DRIFTSCOPE_SIMD     run the kernels on one SIMD target (--version lists them; every target
                      gives the same results, bit for bit)
  NO_COLOR, COLUMNS   no colours; the width that tables fit

`driftscope SUBCOMMAND --help` explains each subcommand; docs/cli.md is the reference.)HELP");
  // As ripgrep's --version, the SIMD code in use: what a bug report about speed needs to say.
  app.set_version_flag("--version", [] {
    std::string all;
    for (const auto& t : driftscope::simd_targets()) all += " " + t;
    return std::string("driftscope ") + DRIFTSCOPE_VERSION + "\nsimd: " + driftscope::simd_target() +
           " (this CPU runs:" + all + "; DRIFTSCOPE_SIMD=NAME picks one)";
  });
  app.require_subcommand(1);
  app.fallthrough(false);

  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (auto& spec : registry) {
    size_t before = app.get_subcommands({}).size();
    auto run = spec.setup(app);
    auto subs = app.get_subcommands({});
    CLI::App* sub = subs.size() > before ? subs.back() : nullptr;
    runners.emplace_back(sub, std::move(run));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line on stderr and exit 2, like every other usage error, naming the subcommand
    // whose arguments were wrong.
    std::string where = "driftscope";
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::string what = e.what();
    if (where == "driftscope") {
      std::fprintf(stderr, "driftscope: error: %s (try driftscope --help)\n", what.c_str());
    } else {
      std::fprintf(stderr, "driftscope: error: %s: %s (try %s --help)\n", where.c_str() + 11,
                   what.c_str(), where.c_str());
    }
    return kExitTrouble;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub && sub->parsed()) return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driftscope: error: %s\n", e.what());
    return kExitTrouble;
  }
  return kExitTrouble;
}
