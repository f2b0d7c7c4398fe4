// Throughput of a whole comparison of cached float32 dumps against a plain mmap read of the same
// files on the same threads, side by side in one run (issue 13 §5: target >= 35%).
//
//   ds_bench_compare_throughput [--mb N] [--tensor-mb M] [--threads T] [--repeat R] [--dir D] [BIN...]
//   ds_bench_compare_throughput --startup BIN [--repeat R] [--dir D]
//
// Writes three dumps of N MiB of f32 each (default 512) in tensors of M MiB (default 16): the
// reference, a candidate slightly off but passing (the common case: no failure diagnosis runs)
// and a noisy one (Side), and reads them once so that all live in the page cache. Then, best of
// R runs (default 3) each:
//   read:    mmap both files, every 8-byte word loaded once on T threads (1 MiB blocks), unmap;
//   compare: driftscope::compare_files on T threads (open, lazy CRCs, metrics, verdict).
//   details: the same with CompareOptions::details (what `compare --html` measures: histogram,
//            heatmap, worst elements), timed alternately with compare so that both see the same
//            load; printed as the ratio details / compare (issue 30 item 2: <= 1.3), on T threads
//            and, when T > 1, on 1 thread as well; for the scaled candidate and for a third dump,
//            a noisy one (ref + U(±1e-3): a few d per chunk that no float32 holds).
//   BIN:     each `BIN compare A B -q -j T` given (an old and a new build: a change side by side),
//            timed as a child process.
// Both start from a fresh map, so both pay the same page-table faults. The dumps are deleted.
//
// --startup: the start-up cost of `BIN compare` (issue 30 item 3: two tiny dumps in <= 10 ms).
// Two dumps of one 16-element f32 tensor; R rounds (default 31) alternate `BIN compare A B -q`
// with `BIN --version` (process start, dynamic loading, static initialisers: the floor any
// command pays) and print the medians and the difference, which is what compare itself adds.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "child_run.hpp"
#include "common/thread_pool.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/simd.hpp"
#include "driftscope/writer.hpp"
#include "plain_read.h"

namespace fs = std::filesystem;
using namespace driftscope;
using Clock = std::chrono::steady_clock;

namespace {

volatile uint64_t g_sink;

double cpu_now() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Best wall time and best CPU time (all threads, user + system) of `repeat` runs. On a shared
// machine the wall time suffers from other people's load; the CPU time much less.
struct Best {
  double wall = 1e300, cpu = 1e300;
};
template <class F>
Best best_of(int repeat, F&& f) {
  Best b;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    const double c0 = cpu_now();
    f();
    b.cpu = std::min(b.cpu, cpu_now() - c0);
    b.wall = std::min(b.wall, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return b;
}

// The reference, or a candidate: kScaled, ref·(1 + 10^-6) (within the default f32 criteria,
// every d a float32 value); kNoisy, ref + U(±10^-3), absolute noise as a lower-precision backend
// gives it, so that the few references much smaller than their noise have a d no float32 holds.
enum class Side { kRef, kScaled, kNoisy };
bool write_dump(const std::string& path, size_t total_mib, size_t tensor_mib, Side side) {
  auto w = Writer::create(path);
  if (!w) return false;
  const size_t n = tensor_mib * (size_t{1} << 20) / sizeof(float);
  std::vector<float> v(n);
  uint64_t x = 0x9e3779b97f4a7c15ull, y = 0x2545f4914f6cdd1dull;
  for (size_t t = 0; t * tensor_mib < total_mib; ++t) {
    for (size_t i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64: cheap, deterministic
      const float ref = static_cast<float>(static_cast<int64_t>(x >> 11) % 20001 - 10000) * 1e-4f;
      if (side == Side::kNoisy) {
        y ^= y << 13, y ^= y >> 7, y ^= y << 17;
        v[i] = ref + static_cast<float>(static_cast<int64_t>(y >> 11) % 2001 - 1000) * 1e-6f;
      } else {
        v[i] = side == Side::kScaled ? ref * (1.0f + 1e-6f) : ref;
      }
    }
    TensorInfo info;
    info.name = "layers." + std::to_string(t) + ".out";
    info.op_type = "Linear";
    info.dtype = DType::f32;
    info.shape = {n / 1024, 1024};
    if (!(*w)->write(info, std::as_bytes(std::span<const float>(v)))) return false;
  }
  return static_cast<bool>((*w)->close());
}

// Maps each file, loads every word once on `threads` threads, unmaps.
void mmap_read(const std::vector<std::string>& files, unsigned threads) {
  struct Map {
    const std::byte* p;
    size_t n;
  };
  std::vector<Map> maps;
  for (const auto& f : files) {
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) std::exit(2);
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) std::exit(2);
    maps.push_back({static_cast<const std::byte*>(p), static_cast<size_t>(st.st_size)});
  }
  struct Block {
    const std::byte* p;
    size_t n;
  };
  std::vector<Block> blocks;
  for (const auto& m : maps)
    for (size_t off = 0; off < m.n; off += (size_t{1} << 20))
      blocks.push_back({m.p + off, std::min<size_t>(size_t{1} << 20, m.n - off)});
  std::vector<uint64_t> sums(blocks.size());
  detail::parallel_for(
      blocks.size(),
      [&](size_t b) { sums[b] = ds_plain_read_sum(blocks[b].p, blocks[b].n); },
      threads);
  uint64_t t = 0;
  for (uint64_t s : sums) t += s;
  g_sink = t;
  for (const auto& m : maps) ::munmap(const_cast<std::byte*>(m.p), m.n);
}

// Wall and CPU seconds of one child run; wall < 0 when it failed (exit 2 or worse).
Best run_child(const std::vector<std::string>& argv) {
  const dsbench::ChildRun c = dsbench::run_child(argv);
  if (c.exit_code < 0 || c.exit_code >= 2) return {-1, -1};
  return {c.wall, c.cpu};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run_startup(const std::string& bin, int repeat, const fs::path& dir) {
  const std::string a = (dir / ("ds-bench-st-a-" + std::to_string(::getpid()) + ".tdump")).string();
  const std::string b = (dir / ("ds-bench-st-b-" + std::to_string(::getpid()) + ".tdump")).string();
  for (const auto& [path, scale] : {std::pair{a, 1.0f}, std::pair{b, 1.0f + 1e-7f}}) {
    auto w = Writer::create(path);
    if (!w) return 2;
    std::vector<float> v(16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f * scale;
    TensorInfo info;
    info.name = "x";
    info.dtype = DType::f32;
    info.shape = {4, 4};
    if (!(*w)->write(info, std::as_bytes(std::span<const float>(v))) || !(*w)->close()) return 2;
  }
  // /bin/true: starting any dynamically linked process at all on this machine, the baseline the
  // two are read against (on a loaded machine all three wait for a core alike).
  std::vector<double> t_cmp, t_ver, c_cmp, c_ver, t_true, c_true;
  for (int r = 0; r < repeat; ++r) {
    const dsbench::ChildRun c = dsbench::run_child({bin, "compare", a, b, "-q", "--no-progress"});
    const dsbench::ChildRun v = dsbench::run_child({bin, "--version"});
    const dsbench::ChildRun t = dsbench::run_child({"/bin/true"});
    t_true.push_back(t.wall);
    c_true.push_back(t.cpu);
    if (c.exit_code != 0 || v.exit_code != 0) {
      std::fprintf(stderr, "ds_bench_compare_throughput: %s failed (exit %d / %d)\n", bin.c_str(),
                   c.exit_code, v.exit_code);
      fs::remove(a);
      fs::remove(b);
      return 2;
    }
    t_cmp.push_back(c.wall);
    t_ver.push_back(v.wall);
    c_cmp.push_back(c.cpu);
    c_ver.push_back(v.cpu);
  }
  fs::remove(a);
  fs::remove(b);
  // CPU time (user + system) as well: on a shared machine the wall time is mostly waiting for a core.
  const double mc = median(t_cmp), mv = median(t_ver), cc = median(c_cmp), cv = median(c_ver);
  const double mt = median(t_true), ct = median(c_true);
  std::printf("start-up of %s, median of %d alternating runs\n", bin.c_str(), repeat);
  std::printf("  /bin/true                    %7.2f ms wall, %6.2f ms CPU (starting any process here)\n",
              1e3 * mt, 1e3 * ct);
  std::printf("  --version                    %7.2f ms wall, %6.2f ms CPU (this binary's start: the floor)\n",
              1e3 * mv, 1e3 * cv);
  std::printf("  compare of two tiny dumps    %7.2f ms wall, %6.2f ms CPU = %.2fx --version's CPU,"
              " %.2f ms wall over /bin/true (target <= 10 ms wall)\n", 1e3 * mc, 1e3 * cc, cc / cv,
              1e3 * (mc - mt));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // DRIFTSCOPE_SIMD, as the driftscope command reads it: `DRIFTSCOPE_SIMD=AVX2 make bench`
  // measures what a CPU without AVX-512 runs.
  if (auto simd = driftscope::use_simd_target_from_env(); !simd) {
    std::fprintf(stderr, "%s\n", simd.error().message.c_str());
    return 2;
  }
  size_t mib = 512, tensor_mib = 16;
  int repeat = 3;
  unsigned threads = 0;
  std::string startup;
  fs::path dir = fs::temp_directory_path();
  std::vector<std::string> bins;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      bins.push_back(fs::absolute(s).string());
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: ds_bench_compare_throughput [--mb N] [--tensor-mb M] [--threads T] "
                           "[--repeat R] [--dir D] [BIN...]\n");
      return 2;
    }
    const char* v = argv[++i];
    if (s == "--mb") mib = std::max<size_t>(1, std::strtoull(v, nullptr, 10));
    else if (s == "--tensor-mb") tensor_mib = std::max<size_t>(1, std::strtoull(v, nullptr, 10));
    else if (s == "--threads") threads = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
    else if (s == "--repeat") repeat = std::max(1, std::atoi(v));
    else if (s == "--dir") dir = v;
    else if (s == "--startup") startup = fs::absolute(v).string();
    else {
      std::fprintf(stderr, "ds_bench_compare_throughput: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (!startup.empty()) return run_startup(startup, repeat == 3 ? 31 : repeat, dir);
  const unsigned all = threads ? threads : detail::hardware_threads();
  const std::string a = (dir / ("ds-bench-tp-a-" + std::to_string(::getpid()) + ".tdump")).string();
  const std::string b = (dir / ("ds-bench-tp-b-" + std::to_string(::getpid()) + ".tdump")).string();
  const std::string nz = (dir / ("ds-bench-tp-n-" + std::to_string(::getpid()) + ".tdump")).string();
  if (!write_dump(a, mib, tensor_mib, Side::kRef) || !write_dump(b, mib, tensor_mib, Side::kScaled) ||
      !write_dump(nz, mib, tensor_mib, Side::kNoisy)) {
    std::fprintf(stderr, "ds_bench_compare_throughput: cannot write the dumps in %s\n", dir.c_str());
    return 2;
  }
  const double bytes = static_cast<double>(fs::file_size(a) + fs::file_size(b));
  mmap_read({a, b, nz}, all);  // into the page cache
  CompareOptions o;
  o.threads = all;
  Verdict verdict = Verdict::pass;
  const Best t_read = best_of(repeat, [&] { mmap_read({a, b}, all); });
  auto run_compare = [&](const CompareOptions& opts, const std::string& cand) {
    auto r = compare_files(a, cand, opts);
    if (!r) {
      std::fprintf(stderr, "compare: %s\n", r.error().to_string().c_str());
      std::exit(2);
    }
    verdict = r->verdict;
  };
  const Best t_cmp = best_of(repeat, [&] { run_compare(o, b); });
  const Verdict scaled_verdict = verdict;
  // Plain and details alternate run by run, on `all` threads and on 1, so a burst of someone
  // else's load hits both sides of each ratio alike.
  // Both candidates: the scaled one, whose every d is a float32 value (the kernel's ULP distance
  // proves it, and the details run on float32 lanes), and the noisy one, whose chunks nearly all
  // hold a few d that are not.
  struct DetailRow {
    const char* candidate;
    unsigned threads;
    Best plain, details;
  };
  std::vector<DetailRow> detail_rows;
  for (const auto& [cand, label] : {std::pair{b, "r(1+1e-6)"}, std::pair{nz, "r+U(1e-3)"}}) {
    for (unsigned t : all > 1 ? std::vector<unsigned>{all, 1} : std::vector<unsigned>{all}) {
      CompareOptions plain = o, details = o;
      plain.threads = details.threads = t;
      details.details = true;
      DetailRow row{label, t, {}, {}};
      for (int i = 0; i < repeat; ++i) {
        const Best p = best_of(1, [&] { run_compare(plain, cand); });
        const Best d = best_of(1, [&] { run_compare(details, cand); });
        row.plain = {std::min(row.plain.wall, p.wall), std::min(row.plain.cpu, p.cpu)};
        row.details = {std::min(row.details.wall, d.wall), std::min(row.details.cpu, d.cpu)};
      }
      detail_rows.push_back(row);
    }
  }
  std::vector<Best> t_bins;
  for (const auto& bin : bins) {
    Best best;
    for (int r = 0; r < repeat && best.wall >= 0; ++r) {
      Best t = run_child({bin, "compare", a, b, "-q", "--no-progress", "-j", std::to_string(all)});
      if (t.wall < 0) best = t;
      else best = {std::min(best.wall, t.wall), std::min(best.cpu, t.cpu)};
    }
    t_bins.push_back(best);
  }
  fs::remove(a);
  fs::remove(b);
  fs::remove(nz);
  fs::remove(nz);
  std::printf("compare of cached f32 dumps, %zu MiB per side in %zu MiB tensors, %u threads, best of %d, "
              "SIMD %s\n", mib, tensor_mib, all, repeat, driftscope::simd_target().c_str());
  auto line = [&](const char* what, const Best& t, const std::string& note) {
    std::printf("  %-16s %7.2f GB/s = %5.1f%% of the read; CPU %6.3f s = %5.1f%% of the read's  %s\n", what,
                bytes / t.wall / 1e9, 100 * t_read.wall / t.wall, t.cpu, 100 * t_read.cpu / t.cpu, note.c_str());
  };
  std::printf("  %-16s %7.2f GB/s; CPU %6.3f s\n", "plain mmap read", bytes / t_read.wall / 1e9, t_read.cpu);
  line("compare_files", t_cmp, "(target >= 35%; verdict " + std::string(verdict_name(scaled_verdict)) + ")");
  for (const DetailRow& r : detail_rows)
    std::printf("  --html details, cand %s, %u thread%s: %.3f s wall vs %.3f s plain = %.2fx; CPU %.3f s vs %.3f s"
                " = %.2fx (target <= 1.3x)\n",
                r.candidate, r.threads, r.threads == 1 ? " " : "s", r.details.wall, r.plain.wall,
                r.details.wall / r.plain.wall, r.details.cpu, r.plain.cpu, r.details.cpu / r.plain.cpu);
  for (size_t i = 0; i < bins.size(); ++i) {
    if (t_bins[i].wall < 0) std::printf("  BIN#%zu compare failed (%s)\n", i, bins[i].c_str());
    else line(("BIN#" + std::to_string(i) + " compare").c_str(), t_bins[i], bins[i]);
  }
  return 0;
}
