// Growth of paths that were quadratic (issue 23 item 4), each timed at N and at 4N in one run:
// a linear path grows ~4x, a quadratic one ~16x. Rows:
//   model-explorer  report_to_model_explorer over N output pairs (compare --model-explorer)
//   manifest-keys   DumpSet::parse_manifest with N metadata keys
//   manifest-ranks  DumpSet::parse_manifest with N ranks (4N = 4,096, the spec's maximum)
//   check           check() + its text and JSON reports on a dump of N constant tensors, one
//                   finding each (the summary counts the distinct names)
// Usage: ds_bench_scaling [--dir DIR] [--only ROW] [--scale S]  (S multiplies every N; default 1)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "driftscope/check.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/report.hpp"
#include "driftscope/writer.hpp"
#include "compare/report_access.hpp"

using namespace driftscope;
using Clock = std::chrono::steady_clock;

namespace {

// The best of a few runs for short timings (noise), one run once a call takes a second.
double time_of(const std::function<void()>& fn) {
  double best = 1e100, spent = 0;
  for (int i = 0; i < 5 && spent < 1.0; ++i) {
    auto t0 = Clock::now();
    fn();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

// `make(n)` prepares the input (not timed) and returns the timed call.
void row(const char* name, size_t n, const std::function<std::function<void()>(size_t)>& make) {
  auto small = make(n);
  double t1 = time_of(small);
  small = nullptr;
  auto large = make(4 * n);
  double t4 = time_of(large);
  std::printf("%-15s N=%-7zu %9.4f s   4N=%-7zu %9.4f s   growth %5.2f  (linear ~4, quadratic ~16)\n", name, n, t1,
              4 * n, t4, t4 / std::max(t1, 1e-9));
  std::fflush(stdout);
}

std::function<void()> model_explorer(size_t n) {
  auto r = std::make_shared<Report>();
  r->pairs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    PairResult& p = r->pairs[i];
    // Names in an order unlike their sorted one, as a real model's layer names are.
    driftscope::detail::ReportAccess::name(p.ref) = fmt::format("layer{}.out", (i * 7919) % n);
    p.ref.role = Role::output;
    p.compared = true;
    p.status = i % 3 ? PairStatus::pass : PairStatus::fail;
    p.error = 1e-7 * static_cast<double>(i + 1);
  }
  return [r] {
    std::string s = report_to_model_explorer(*r);
    if (s.size() < 10) std::abort();
  };
}

std::string manifest_head(size_t ranks) {
  std::string s = fmt::format(R"({{"format": "driftscope.set/1", "world_size": {}, "groups": {{"dp": {}}}, "order": "lockstep", "ranks": [)",
                              ranks, ranks);
  for (size_t i = 0; i < ranks; ++i)
    s += fmt::format(R"({}{{"rank": {}, "file": "rank{}.tdump", "coords": {{"dp": {}}}}})", i ? ", " : "", i, i, i);
  return s + "]";
}

std::function<void()> manifest_keys(size_t n) {
  auto text = std::make_shared<std::string>(manifest_head(1) + R"(, "metadata": {)");
  for (size_t i = 0; i < n; ++i) *text += fmt::format(R"({}"key{}": "value {}")", i ? ", " : "", (i * 7919) % n, i);
  *text += "}}";
  return [text, n] {
    auto s = DumpSet::parse_manifest(*text, "/d");
    if (!s.ok() || s->metadata.size() != n) std::abort();
  };
}

std::function<void()> manifest_ranks(size_t n) {
  auto text = std::make_shared<std::string>(manifest_head(n) + "}");
  return [text, n] {
    auto s = DumpSet::parse_manifest(*text, "/d");
    if (!s.ok() || s->ranks.size() != n) std::abort();
  };
}

std::function<void()> check_run(const std::string& dir, size_t n) {
  const std::string path = fmt::format("{}/ds-bench-scaling-{}-{}.tdump", dir, ::getpid(), n);
  WriterOptions wo;
  auto w = Writer::create(path, wo);
  if (!w.ok()) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), w.error().to_string().c_str());
    std::exit(2);
  }
  const float values[4] = {3, 3, 3, 3};
  for (size_t i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = fmt::format("block{}.const", (i * 7919) % n);
    t.op_type = "Constant";
    t.dtype = DType::f32;
    t.shape = {4};
    if (!(*w)->write(t, std::as_bytes(std::span(values))).ok()) std::exit(2);
  }
  if (!(*w)->close().ok()) std::exit(2);
  return [path, n] {
    auto r = check_file(path);
    if (!r.ok() || r->findings.size() != n) std::abort();
    if (check_to_text(*r).empty() || check_to_json(*r).empty()) std::abort();
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp", only;
  double scale = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--only") only = argv[i + 1];
    else if (a == "--scale") scale = std::atof(argv[i + 1]);
  }
  auto n = [&](size_t base) { return std::max<size_t>(1, static_cast<size_t>(static_cast<double>(base) * scale)); };
  auto want = [&](const char* r) { return only.empty() || only == r; };
  if (want("model-explorer")) row("model-explorer", n(20000), model_explorer);
  if (want("manifest-keys")) row("manifest-keys", n(25000), manifest_keys);
  // 4N stays at the spec's maximum world size (kMaxWorldSize) whatever the scale.
  if (want("manifest-ranks")) row("manifest-ranks", std::min<size_t>(n(16384), kMaxWorldSize / 4), manifest_ranks);
  if (want("check")) {
    row("check", n(20000), [&](size_t k) { return check_run(dir, k); });
    for (size_t k : {n(20000), 4 * n(20000)}) ::unlink(fmt::format("{}/ds-bench-scaling-{}-{}.tdump", dir, ::getpid(), k).c_str());
  }
  return 0;
}
