// driftscope record ...: the seam to the Python recorders (issue 4). The C++ binary stays
// standalone; recording needs a framework runtime, so `record` hands its arguments to
// `python -m driftscope record ...` by exec, after checking that this Python has the package.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "util.hpp"

extern char** environ;

namespace driftscope::cli {
namespace {

constexpr const char* kRecordHelp = R"(Usage: driftscope record RUNTIME ... -o OUT.tdump

Records the intermediate tensors of one run of a model into a dump. Recording happens inside
the framework, so this command runs the driftscope Python package: it executes
  $DRIFTSCOPE_PYTHON -m driftscope record ARGS...   (default interpreter: python3 on PATH)
with the arguments unchanged. That Python needs the package and the runtime you record with:
  pip install <driftscope checkout>        (e.g. `pip install .` in the repository)
  pip install torch | onnxruntime | ai-edge-litert

Runtimes (run `driftscope record RUNTIME --help` for their options):
  torch    a PyTorch model from a Python entry point
  onnx     an ONNX model through ONNX Runtime:  driftscope record onnx MODEL.onnx
           --input NAME=FILE.npy ... -o run.tdump [--provider P] [--fp16]
  tflite   a LiteRT model:  driftscope record tflite MODEL.tflite --input ... -o run.tdump

Exit status: that of the recorder; 2 when Python or the package is missing.
)";

std::string python_path() {
  const char* p = std::getenv("DRIFTSCOPE_PYTHON");
  return p && *p ? p : "python3";
}

// Runs `python -c code` quietly; returns its exit status, or -errno when it cannot start.
int probe(const std::string& python, const char* code) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = {python, "-c", code};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -rc;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_record(const std::vector<std::string>& args) {
  const std::string python = python_path();
  bool help = args.empty() || args[0] == "--help" || args[0] == "-h";
  int st = probe(python, "import importlib.util, sys\n"
                         "import driftscope\n"
                         "sys.exit(0 if importlib.util.find_spec('driftscope.__main__') else 3)");
  if (st < 0) {
    if (help) fmt::print("{}", kRecordHelp);
    return fail(fmt::format("record: cannot run {}: {} (set DRIFTSCOPE_PYTHON to a Python that "
                            "has the driftscope package)", python, std::strerror(-st)));
  }
  if (st != 0) {
    if (help) {
      fmt::print("{}", kRecordHelp);
      return kExitOk;
    }
    return fail(fmt::format(
        "record: {} cannot import the driftscope Python package{}; install it with `pip install "
        "<driftscope checkout>` plus the runtime you record with (torch, onnxruntime or "
        "ai-edge-litert), or set DRIFTSCOPE_PYTHON to a Python that has them",
        python, st == 3 ? " (or it is too old to have `python -m driftscope`)" : ""));
  }
  std::vector<std::string> full = {python, "-m", "driftscope", "record"};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : full) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(python.c_str(), argv.data());
  return fail(fmt::format("record: cannot run {}: {}", python, std::strerror(errno)));
}

std::function<int()> setup_record(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "record", "Record a model run with the Python recorders (torch, onnx, tflite)");
  // Everything after `record` belongs to the Python recorder, --help included.
  sub->prefix_command();
  sub->allow_extras();
  sub->set_help_flag();
  sub->footer(kRecordHelp);
  return [sub] { return run_record(sub->remaining()); };
}

}  // namespace

DRIFTSCOPE_COMMAND(record, 5, setup_record);

}  // namespace driftscope::cli
