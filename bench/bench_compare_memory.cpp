// Peak memory (max RSS) of `driftscope compare` against the record count (issue 7, bug 16).
//
//   ds_bench_compare_memory [--records 10000,100000] [--numel 16] [--dataflow] [--big-mib 1024,4096]
//                           BIN [BIN...]
//
// Writes two dumps of N small f32 tensors each (the candidate slightly off, so every pair is
// measured and some fail), then runs each BIN as `compare A B -q` and `compare A B --json FILE`
// and prints the child's peak RSS (wait4 ru_maxrss) side by side: give an old and a new build to
// see a change (--keep DIR keeps the dumps for a profiler). --dataflow gives every record the data
// flow the PyTorch recorder writes (ds.inputs: the record before it; ds.kind; ds.source: a
// module class and file:line, 8 distinct values). The dumps' size is printed too: memory should stay a small multiple of it.
// The wall and CPU seconds of each run are printed after its RSS; with two or more BINs, the last
// one's peak RSS as a fraction of the first one's (issue 13 §5: 1,000,000 records in 1 GB).
// --big-mib also writes, per size S, two dumps of ONE f32 tensor of S MiB each and prints the peak
// RSS of comparing them: it should stay near the working chunk, not grow with S (issue 13 §5).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "child_run.hpp"
#include "driftscope/dataflow.hpp"
#include "driftscope/writer.hpp"

namespace fs = std::filesystem;
using namespace driftscope;

namespace {

bool write_dump(const std::string& path, size_t n, size_t numel, float scale, bool dataflow) {
  auto w = Writer::create(path);
  if (!w) return false;
  std::vector<float> v(numel);
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < numel; ++k) v[k] = static_cast<float>((i * 31 + k * 7) % 97) * scale + 1.0f;
    TensorInfo t;
    t.name = "model.layers." + std::to_string(i / 8) + ".block." + std::to_string(i % 8) + ".out";
    t.op_type = "Linear";
    t.dtype = DType::f32;
    t.shape = {numel};
    if (dataflow) {
      std::vector<TensorRef> from;
      if (i > 0) from.push_back({"model.layers." + std::to_string((i - 1) / 8) + ".block." + std::to_string((i - 1) % 8) + ".out"});
      t.attrs = {{"ds.inputs", format_inputs(from)},
                 {"ds.kind", "float"},
                 {"ds.source", "Linear  model.py:" + std::to_string(40 + i % 8)}};
    }
    if (!(*w)->write(t, std::as_bytes(std::span<const float>(v)))) return false;
  }
  return static_cast<bool>((*w)->close());
}

struct Run {
  double rss_mib = -1;  // -1 when it could not run or exited 2 (trouble)
  double seconds = 0;      // wall
  double cpu = 0;          // user + system, all threads: what a shared machine does not inflate
};

Run run_child(const std::vector<std::string>& argv) {
  const dsbench::ChildRun c = dsbench::run_child(argv);
  return {c.exit_code >= 0 && c.exit_code != 2 ? c.rss_mib : -1, c.wall, c.cpu};
}

// A dump of one f32 tensor of `mib` MiB. This process holds the tensor while writing it; the
// compare child, which is what is measured, starts after it is freed.
bool write_big(const std::string& path, size_t mib, float scale) {
  auto w = Writer::create(path);
  if (!w) return false;
  const size_t n = mib * (size_t{1} << 20) / sizeof(float);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1009) * scale - 500.0f;
  TensorInfo t;
  t.name = "logits";
  t.op_type = "Linear";
  t.dtype = DType::f32;
  t.shape = {n / 1024, 1024};
  if (!(*w)->write(t, std::as_bytes(std::span<const float>(v)))) return false;
  return static_cast<bool>((*w)->close());
}

std::string fmt(const char* side, size_t n) { return side + std::to_string(n) + ".tdump"; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> counts = {10000, 100000};
  std::vector<size_t> big;
  size_t numel = 16;
  bool dataflow = false;
  std::vector<std::string> bins;
  std::string keep;  // --keep DIR: write the dumps there (a<N>.tdump, b<N>.tdump) and keep them
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--records" && i + 1 < argc) {
      counts.clear();
      std::string list = argv[++i];
      for (size_t p = 0; p <= list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        counts.push_back(std::strtoull(list.substr(p, q - p).c_str(), nullptr, 10));
        p = q + 1;
      }
    } else if (s == "--big-mib" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t p = 0; p <= list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        big.push_back(std::strtoull(list.substr(p, q - p).c_str(), nullptr, 10));
        p = q + 1;
      }
    } else if (s == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else if (s == "--dataflow") {
      dataflow = true;
    } else if (s == "--numel" && i + 1 < argc) {
      numel = std::strtoull(argv[++i], nullptr, 10);
    } else {
      bins.push_back(fs::absolute(s).string());
    }
  }
  if (bins.empty() && keep.empty()) {
    std::fprintf(stderr, "usage: ds_bench_compare_memory [--records N,N] [--numel K] [--dataflow] [--big-mib S,S] [--keep DIR] BIN [BIN...]\n");
    return 2;
  }
  fs::path dir = keep.empty() ? fs::temp_directory_path() / ("ds-bench-mem-" + std::to_string(::getpid()))
                              : fs::path(keep);
  fs::create_directories(dir);
  std::printf("peak RSS in MiB, wall and CPU seconds of `driftscope compare` (f32 tensors of %zu elements%s)\n",
              numel, dataflow ? ", with data flow" : "");
  std::printf("%10s %10s", "records", "dumps MiB");
  for (size_t b = 0; b < bins.size(); ++b)
    std::printf("  %9s%-2zu %6s %6s %9s%-2zu %6s %6s", "plain#", b, "wall s", "cpu s", "--json#", b, "wall s", "cpu s");
  std::printf("\n");
  for (size_t n : counts) {
    const std::string a = (dir / fmt("a", n)).string(), c = (dir / fmt("b", n)).string();
    const std::string js = (dir / "r.json").string();
    if (!write_dump(a, n, numel, 1.0f, dataflow) || !write_dump(c, n, numel, 1.001f, dataflow)) {
      std::fprintf(stderr, "cannot write the dumps in %s\n", dir.c_str());
      return 2;
    }
    double mib = static_cast<double>(fs::file_size(a) + fs::file_size(c)) / (1024.0 * 1024.0);
    std::printf("%10zu %10.1f", n, mib);
    std::fflush(stdout);
    std::vector<Run> plains, jsons;
    for (const auto& bin : bins) {
      Run plain = run_child({bin, "compare", a, c, "-q", "--no-progress"});
      std::error_code ignored;
      fs::remove(js, ignored);  // the previous binary's report: its pages go before this run
      Run json = run_child({bin, "compare", a, c, "-q", "--no-progress", "--json", js});
      std::printf("  %11.1f %6.2f %6.2f %11.1f %6.2f %6.2f", plain.rss_mib, plain.seconds, plain.cpu,
                  json.rss_mib, json.seconds, json.cpu);
      std::fflush(stdout);
      plains.push_back(plain);
      jsons.push_back(json);
    }
    // With two or more builds: the last one's peak RSS as a fraction of the first one's, and
    // bytes per record pair of the last (what a million records cost).
    if (bins.size() >= 2 && plains[0].rss_mib > 0 && jsons[0].rss_mib > 0)
      std::printf("  RSS #%zu/#0 plain %.2f json %.2f (#%zu: %.0f B/pair plain, %.0f with --json)", bins.size() - 1,
                  plains.back().rss_mib / plains[0].rss_mib, jsons.back().rss_mib / jsons[0].rss_mib,
                  bins.size() - 1, plains.back().rss_mib * 1048576.0 / static_cast<double>(n),
                  jsons.back().rss_mib * 1048576.0 / static_cast<double>(n));
    std::printf("\n");
    if (keep.empty()) {
      fs::remove(a);
      fs::remove(c);
    }
  }
  if (!big.empty()) {
    std::printf("\npeak RSS in MiB of `driftscope compare` on a pair of single f32 tensors\n");
    std::printf("%10s %10s", "tensor MiB", "dumps MiB");
    for (size_t b = 0; b < bins.size(); ++b) std::printf("  %9s%-2zu %6s %6s", "plain#", b, "wall s", "cpu s");
    std::printf("\n");
  }
  for (size_t s : big) {
    const std::string a = (dir / ("big-a" + std::to_string(s) + ".tdump")).string();
    const std::string c = (dir / ("big-b" + std::to_string(s) + ".tdump")).string();
    if (!write_big(a, s, 1.0f) || !write_big(c, s, 1.0001f)) {
      std::fprintf(stderr, "cannot write the dumps in %s (disk space?)\n", dir.c_str());
      fs::remove(a);
      fs::remove(c);
      return 2;
    }
    double mib = static_cast<double>(fs::file_size(a) + fs::file_size(c)) / (1024.0 * 1024.0);
    std::printf("%10zu %10.1f", s, mib);
    std::fflush(stdout);
    for (const auto& bin : bins) {
      Run plain = run_child({bin, "compare", a, c, "-q", "--no-progress"});
      std::printf("  %11.1f %6.2f %6.2f", plain.rss_mib, plain.seconds, plain.cpu);
      std::fflush(stdout);
    }
    std::printf("\n");
    fs::remove(a);
    fs::remove(c);
  }
  fs::remove(dir / "r.json");
  if (keep.empty()) fs::remove_all(dir);
  return 0;
}
