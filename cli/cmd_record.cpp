// driftscope record ... and driftscope guard ...: the seam to the Python package (issues 4, 8). The C++ binary stays
// standalone; recording needs a framework runtime, so `record` hands its arguments to
// `python -m driftscope record ...` by exec, after checking that this Python has the package.
// Which Python: $DRIFTSCOPE_PYTHON, else the one installed next to this executable (pip puts the
// command into the scripts folder of the environment it installs into: a venv's bin/ holds that
// venv's python), else python3 on PATH (issue 7, bug 15).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include <fmt/format.h>

#include "command.hpp"
#include "util.hpp"

extern char** environ;

namespace driftscope::cli {
namespace {

constexpr const char* kRecordHelp = R"(Usage: driftscope record RUNTIME ... -o OUT.tdump

Records the intermediate tensors of one run of a model into a dump. Recording happens inside
the framework, so this command runs the driftscope Python package: it executes
  PYTHON -m driftscope record ARGS...
with the arguments unchanged. PYTHON is $DRIFTSCOPE_PYTHON when set, else the first of these
that has the driftscope package: the Python next to this command (after `pip install`, the
Python of the environment it went into, activated or not), then python3 on PATH.
The working directory is not on that Python's module path: a numpy.py or driftscope.py there
cannot stand in for the installed package (give a model's own modules as FILE.py:FUNCTION or
on PYTHONPATH). That Python needs the package and the runtime you record with:
  pip install <driftscope checkout>        (e.g. `pip install .` in the repository)
  pip install torch | onnxruntime | ai-edge-litert

Runtimes (run `driftscope record RUNTIME --help` for their options):
  torch    a PyTorch model from a Python entry point
  onnx     an ONNX model through ONNX Runtime:  driftscope record onnx MODEL.onnx
           --input NAME=FILE.npy ... -o run.tdump [--provider P] [--fp16]
  tflite   a LiteRT model:  driftscope record tflite MODEL.tflite --input ... -o run.tdump

Exit status: that of the recorder; 2 when Python or the package is missing.
)";

// The folder holding this executable, symlinks resolved (a link to a venv's bin/driftscope still
// finds that venv), or nothing where the platform cannot say.
std::optional<std::string> own_folder() {
  std::string exe;
#if defined(__linux__)
  std::vector<char> buf(4096);
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0 || static_cast<size_t>(n) >= buf.size()) return std::nullopt;
  exe.assign(buf.data(), static_cast<size_t>(n));
#elif defined(__APPLE__)
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::string raw(size, '\0');
  if (_NSGetExecutablePath(raw.data(), &size) != 0) return std::nullopt;
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(raw.c_str(), nullptr), &std::free);
  if (!real) return std::nullopt;
  exe = real.get();
#else
  return std::nullopt;
#endif
  auto slash = exe.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  return exe.substr(0, slash == 0 ? 1 : slash);
}

// Interpreters to try, in order, when DRIFTSCOPE_PYTHON is unset. A sibling is used by its own
// path, not resolved: a venv's bin/python3 is a symlink to the base interpreter, and only the
// link's path makes Python find the venv's pyvenv.cfg and site-packages.
std::vector<std::string> default_pythons() {
  std::vector<std::string> out;
  if (auto dir = own_folder()) {
    std::vector<std::string> names;
#ifdef DRIFTSCOPE_WHEEL_PYTHON
    names.push_back(DRIFTSCOPE_WHEEL_PYTHON);  // the version the wheel's extension is built for
#endif
    names.push_back("python3");
    names.push_back("python");
    for (const auto& n : names) {
      std::string path = *dir + (dir->back() == '/' ? "" : "/") + n;
      if (::access(path.c_str(), X_OK) == 0) out.push_back(path);
    }
  }
  out.push_back("python3");
  return out;
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

// `python -c` and `python -m` put the working directory first on sys.path, so a numpy.py, onnx.py
// or driftscope.py in a pull request's checkout or a downloaded model folder would run in place of
// the installed package (SECURITY.md, "The working directory"). Every interpreter this command
// starts removes that entry before it imports anything from sys.path; its own start-up imports
// (site, encodings) happen before the entry is added. -P would do the same, but only from 3.11.
// python/driftscope/_pyexec.py starts the package's own children the same way.
#define DS_SAFE_PATH "import sys\nif not getattr(sys.flags, 'safe_path', False): del sys.path[0]\n"

constexpr const char* kProbeCode =
    DS_SAFE_PATH
    "import importlib.util\n"
    "import driftscope\n"
    "sys.exit(0 if importlib.util.find_spec('driftscope.__main__') else 3)";

// `python -m driftscope COMMAND ARGS...` without the working directory: with -c, sys.argv is
// ["-c", COMMAND, ARGS...] and run_module puts the module's file at argv[0], as -m does.
constexpr const char* kRunCode =
    DS_SAFE_PATH
    "import runpy\n"
    "runpy.run_module('driftscope', run_name='__main__', alter_sys=True)";
#undef DS_SAFE_PATH

}  // namespace

// Runs `PYTHON -m driftscope <command> args...` (as kRunCode) by exec (the Python subcommands);
// `help` is printed when --help is asked for and no Python with the package is found.
int run_python(const std::string& command, const char* help_text,
               const std::vector<std::string>& args) {
  bool help = args.empty() || args[0] == "--help" || args[0] == "-h";
  const char* env = std::getenv("DRIFTSCOPE_PYTHON");
  const bool chosen = env && *env;
  const std::vector<std::string> candidates =
      chosen ? std::vector<std::string>{env} : default_pythons();
  std::string python;
  int st = 0;
  int import_failure = 0;  // status of the last candidate that ran but lacks the package
  for (const auto& c : candidates) {
    python = c;
    st = probe(python, kProbeCode);
    if (st == 0) break;
    if (st > 0) import_failure = st;
  }
  if (st != 0 && import_failure == 0) {
    if (help) fmt::print("{}", help_text);
    return fail(fmt::format("{}: cannot run {}: {} (set DRIFTSCOPE_PYTHON to a Python that "
                            "has the driftscope package)", command, python, std::strerror(-st)));
  }
  if (st != 0) {
    if (help) {
      fmt::print("{}", help_text);
      return kExitOk;
    }
    std::string who = python + " cannot";
    if (candidates.size() > 1) {
      who = "none of";
      for (size_t i = 0; i < candidates.size(); ++i)
        who += fmt::format("{} {}", i ? "," : "", candidates[i]);
      who += " can";
    }
    return fail(fmt::format(
        "{}: {} import the driftscope Python package{}; install it with `pip install "
        "<driftscope checkout>` plus the runtime {} (torch, onnxruntime or "
        "ai-edge-litert), or set DRIFTSCOPE_PYTHON to a Python that has them",
        command, who,
        import_failure == 3 ? " (or it is too old to have `python -m driftscope`)" : "",
        command == "record" ? "you record with" : "you use"));
  }
  std::vector<std::string> full = {python, "-c", kRunCode, command};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : full) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(python.c_str(), argv.data());
  return fail(fmt::format("{}: cannot run {}: {}", command, python, std::strerror(errno)));
}

namespace {

std::function<int()> setup_record(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "record", "Record a model run with the Python recorders (torch, onnx, tflite)");
  // Everything after `record` belongs to the Python recorder, --help included.
  sub->prefix_command();
  sub->allow_extras();
  sub->set_help_flag();
  sub->footer(kRecordHelp);
  return [sub] { return run_python("record", kRecordHelp, sub->remaining()); };
}

constexpr const char* kGuardHelp = R"(Usage: driftscope guard MODEL [options]
       driftscope guard --model FILE.py:FUNCTION [options]

Runs one model on every runtime and precision this machine has (ONNX Runtime float32, float16,
INT8, ...; LiteRT XNNPACK and reference kernels; PyTorch float32, bfloat16, float16), compares
each with a reference backend on the same generated inputs, and gives one verdict: exit 0 pass,
1 degraded, 3 silent failure (zeros, NaN/Inf, constant output), 2 usage error or the reference
failed. Like `record`, this runs the driftscope Python package:
  PYTHON -m driftscope guard ARGS...
(PYTHON chosen as for `driftscope record`; it needs the package and the runtimes to check).
The options are listed by `driftscope guard --help` once that Python is found; see
docs/howto/guard.md.
)";

std::function<int()> setup_guard(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "guard", "Check a model on every runtime and precision here: zeros, NaN, drift");
  sub->prefix_command();
  sub->allow_extras();
  sub->set_help_flag();
  sub->footer(kGuardHelp);
  return [sub] { return run_python("guard", kGuardHelp, sub->remaining()); };
}

// `reference` and `evidence` (docs/references.md) are Python for the same reason as `record`:
// the ONNX rewrite needs the onnx package, reference runs the recorders, and evidence runs the
// ordering check through the package's compare.
constexpr const char* kReferenceHelp = R"(Usage: driftscope reference init MODEL.onnx -o MODEL.hash.onnx [--seed N]
       driftscope reference run --model FILE.py:FUNCTION -o DIR [--hash-init]
       driftscope reference check REF32.tdump CAND.tdump --reference64 REF64.tdump
                                  [--format text|json|markdown] [-o OUT]

Numerical references both sides of a port can rebuild (docs/references.md):
  init   rewrite an ONNX model's weights with the hash initialiser at native scale
  run    record a PyTorch model in float32 and float64 on the same inputs
  check  the float64 ordering rule per intermediate (compare --reference64) and argmax flips
         on every output; exit 0 all pass, 1 any fails, 2 trouble
Like `record`, this runs the driftscope Python package (PYTHON -m driftscope reference ...).
)";

constexpr const char* kEvidenceHelp = R"(Usage: driftscope evidence declare LEDGER --id ID --reference REF32.tdump
                                   --reference64 REF64.tdump [--model F] [--input F]... [...]
       driftscope evidence measure LEDGER --id ID --candidate CAND.tdump
       driftscope evidence verify LEDGER [--head SHA256]

Evidence that cannot be re-tuned: an append-only, hash-chained JSONL ledger. `declare` hashes
the reference dumps, model, inputs and policy and fixes the tolerances before anything is
measured; `measure` runs the declared ordering check once (refused twice, or when a declared file
changed); `verify` re-hashes every line and file and reports any edit (exit 1). See
docs/references.md. Runs the driftscope Python package (PYTHON -m driftscope evidence ...).
)";

std::function<int()> setup_python_verb(CLI::App& app, const char* name, const char* summary,
                                       const char* help) {
  auto* sub = app.add_subcommand(name, summary);
  sub->prefix_command();
  sub->allow_extras();
  sub->set_help_flag();
  sub->footer(help);
  return [sub, name, help] { return run_python(name, help, sub->remaining()); };
}

// `replay` and `repro` (docs/howto/replay.md, docs/howto/repro.md) run the guard's backends
// with values substituted inside the model: Python, as `guard` is.
constexpr const char* kReplayHelp = R"(Usage: driftscope replay MODEL.onnx|MODEL.tflite|--model FILE.py:FUNCTION
                        --reference BACKEND --candidate BACKEND [--at TENSOR]... [options]

Is this op really the cause? Runs the candidate backend with the reference's value put back at
TENSOR and reports each output's error before and after (output replay), runs TENSOR's op alone
on the reference's inputs (op replay: introduced or inherited), --isolate does that for every op
in one pass, and the shares of each output's error the origins account for (attribution).
Backends are the guard's names (driftscope guard --list-backends). Like `guard`, this runs the
driftscope Python package: PYTHON -m driftscope replay ARGS... ; see docs/howto/replay.md.
)";

constexpr const char* kReproHelp = R"(Usage: driftscope repro MODEL.onnx --reference BACKEND --candidate BACKEND --at TENSOR
                       -o DIR [--anonymize] [options]

Writes the smallest subgraph around TENSOR that still reproduces the candidate's error as a
standalone bundle (model, inputs, expected outputs, run.py that exits 1 when it reproduces,
README with runtime versions, SHA256SUMS); --anonymize replaces names and weights by
hash-initialised ones and re-runs the bundle to prove it still reproduces. Runs the driftscope
Python package: PYTHON -m driftscope repro ARGS... ; see docs/howto/repro.md.
)";

constexpr const char* kLlmCompareHelp = R"(Usage: driftscope llm-compare REF.tdump CAND.tdump [--json FILE] [--top-k K]

Two generations recorded by `driftscope record llm` (step.K/... tensors, the tokens as run
metadata): per step the logits' top-1 agreement, top-k overlap, KL divergence and max abs
difference; the first step whose greedy token differs; at that step the first layer beyond
tolerance; steps one run does not have, named. Exit 0 agree, 1 diverge, 2 bad input. Runs the
driftscope Python package: PYTHON -m driftscope llm-compare ARGS... ; see docs/howto/llm.md.
)";

std::function<int()> setup_llm_compare(CLI::App& app) {
  return setup_python_verb(app, "llm-compare",
                           "Two language-model generations: first flipped token, then the layer",
                           kLlmCompareHelp);
}

std::function<int()> setup_replay(CLI::App& app) {
  return setup_python_verb(app, "replay",
                           "Put the reference's value back at a tensor: is this op the cause?",
                           kReplayHelp);
}

std::function<int()> setup_repro(CLI::App& app) {
  return setup_python_verb(app, "repro",
                           "Write a shareable minimal repro bundle around an origin",
                           kReproHelp);
}

std::function<int()> setup_reference(CLI::App& app) {
  return setup_python_verb(app, "reference",
                           "Checkpoint-free reference weights, float64 reference runs, ordering rule",
                           kReferenceHelp);
}

std::function<int()> setup_evidence(CLI::App& app) {
  return setup_python_verb(app, "evidence",
                           "Declare a reference check, measure it once, verify nothing was edited",
                           kEvidenceHelp);
}

}  // namespace

DRIFTSCOPE_COMMAND(record, 5, setup_record);
DRIFTSCOPE_COMMAND(guard, 37, setup_guard);
DRIFTSCOPE_COMMAND(reference, 38, setup_reference);
DRIFTSCOPE_COMMAND(evidence, 39, setup_evidence);
DRIFTSCOPE_COMMAND(replay, 41, setup_replay);
DRIFTSCOPE_COMMAND(repro, 42, setup_repro);
DRIFTSCOPE_COMMAND(llm_compare, 43, setup_llm_compare);

}  // namespace driftscope::cli
