// ds_bench_kernels: throughput of compare_pair against plain memory-read bandwidth, measured in
// the same run on the same bytes (issue 30: f32 >= 70% with all cores, f16/bf16 >= 60%).
//
//   ds_bench_kernels [--mb N] [--repeat R] [--rounds K] [--threads T]
//       synthetic pairs of N/4 Mi elements per side (default N = 256) in f32, f16 and bf16:
//       compare_pair against the plain read of the same bytes at all threads and at 1 thread
//       (median of K side-by-side rounds, default 5), and every SIMD target on f32, f16, bf16;
//       --dtype: that row only
//   ds_bench_kernels --pairs REF.tdump CAND.tdump [--repeat R] [--threads T] [--json]
//       every same-named tensor pair of two dumps (used by bench/compare_vs_numpy.py)
//
// Times are the best of R runs (default 5): the least disturbed run on a shared machine.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/thread_pool.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/simd.hpp"
#include "numerics/pair_metrics.hpp"
#include "plain_read.h"

namespace {

using driftscope::numerics::PairOptions;
using Clock = std::chrono::steady_clock;

double cpu_now() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The least CPU time (all threads) of the last best_seconds call's runs: on a machine shared with
// other people's jobs the wall time is partly waiting for a core, the CPU time much less so.
double g_best_cpu = 0;

template <class F>
double best_seconds(int repeat, F&& f) {
  double best = 1e300;
  g_best_cpu = 1e300;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    const double c0 = cpu_now();
    f();
    g_best_cpu = std::min(g_best_cpu, cpu_now() - c0);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

volatile uint64_t g_sink;

// Plain read bandwidth: every 8-byte word of the spans is loaded once (bench/plain_read.c, in C).
// The spans are cut into 1 MiB blocks that the same thread pool distributes.
double read_seconds(const std::vector<std::span<const std::byte>>& spans, unsigned threads,
                    int repeat) {
  struct Block {
    const std::byte* p;
    size_t n;
  };
  std::vector<Block> blocks;
  for (auto s : spans)
    for (size_t off = 0; off < s.size(); off += (1u << 20))
      blocks.push_back({s.data() + off, std::min<size_t>(1u << 20, s.size() - off)});
  std::vector<uint64_t> sums(blocks.size());
  return best_seconds(repeat, [&] {
    driftscope::detail::parallel_for(
        blocks.size(),
        [&](size_t b) { sums[b] = ds_plain_read_sum(blocks[b].p, blocks[b].n); },
        threads);
    uint64_t t = 0;
    for (uint64_t s : sums) t += s;
    g_sink = t;
  });
}

struct Pair {
  const driftscope::TensorInfo* ref;
  std::span<const std::byte> ref_payload;
  const driftscope::TensorInfo* cand;
  std::span<const std::byte> cand_payload;
};

double compare_seconds(const std::vector<Pair>& pairs, unsigned threads, int repeat) {
  PairOptions o;
  o.threads = threads;
  o.rtol = 1e-3;
  o.atol = 1e-5;
  return best_seconds(repeat, [&] {
    for (const auto& p : pairs) {
      auto m = driftscope::numerics::compare_pair(*p.ref, p.ref_payload, *p.cand, p.cand_payload, o);
      if (!m) {
        std::fprintf(stderr, "compare_pair: %s\n", m.error().to_string().c_str());
        std::exit(2);
      }
      g_sink = m->mismatch_count;
    }
  });
}

// Median ratio of `rounds` side-by-side measurements: each round times the plain read and then
// compare_pair of the same bytes on the same threads (best of `repeat` each), so both see the
// same load from whoever else shares the machine; the median discards the rounds it disturbed.
struct SideBySide {
  double read_gbs = 0, cmp_gbs = 0, ratio = 0;  // medians over the rounds
  double cpu_ratio = 0;                         // read CPU time / compare CPU time, median
};
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
SideBySide side_by_side(const std::vector<Pair>& pairs, const std::vector<std::span<const std::byte>>& spans,
                        double bytes, unsigned threads, int repeat, int rounds) {
  std::vector<double> rd, cp, ratio, cpu;
  for (int k = 0; k < rounds; ++k) {
    const double tr = read_seconds(spans, threads, repeat);
    const double cr = g_best_cpu;
    const double tc = compare_seconds(pairs, threads, repeat);
    rd.push_back(bytes / tr / 1e9);
    cp.push_back(bytes / tc / 1e9);
    ratio.push_back(tr / tc);
    cpu.push_back(cr / g_best_cpu);
  }
  return {median(rd), median(cp), median(ratio), median(cpu)};
}

int run_synthetic(size_t mib, int repeat, unsigned threads, int rounds, const std::string& only) {
  const size_t n = mib * (1u << 20) / sizeof(float);
  std::vector<float> a(n), b(n);
  driftscope::detail::parallel_for(64, [&](size_t part) {
    std::mt19937 rng(static_cast<unsigned>(part));
    std::normal_distribution<float> g(0.f, 1.f);
    for (size_t i = part * n / 64; i < (part + 1) * n / 64; ++i) {
      a[i] = g(rng);
      b[i] = a[i] + 1e-3f * g(rng);
    }
  });
  // The same values as float16 and bfloat16 (rounded once): half the bytes per element.
  std::vector<uint16_t> a16(n), b16(n), abf(n), bbf(n);
  driftscope::detail::parallel_for(64, [&](size_t part) {
    for (size_t i = part * n / 64; i < (part + 1) * n / 64; ++i) {
      a16[i] = driftscope::double_to_f16(a[i]);
      b16[i] = driftscope::double_to_f16(b[i]);
      abf[i] = driftscope::double_to_bf16(a[i]);
      bbf[i] = driftscope::double_to_bf16(b[i]);
    }
  });
  // A float16 (bfloat16) run against another of the same precision: the candidate 0 to 3 ULPs
  // from the reference, either way (ULP-sized differences, where the test for a new max_rel_diff
  // is bounded by the ULP distance: docs/metrics.md §8).
  std::vector<uint16_t> b16u(n), bbfu(n);
  driftscope::detail::parallel_for(64, [&](size_t part) {
    std::mt19937 rng(static_cast<unsigned>(part + 64));
    std::uniform_int_distribution<int> steps(-3, 3);
    for (size_t i = part * n / 64; i < (part + 1) * n / 64; ++i) {
      // In bits, away from ±0 (where a step would change the sign or make a NaN).
      const int s16 = steps(rng), sbf = steps(rng);
      b16u[i] = (a16[i] & 0x7FFF) > 3 ? static_cast<uint16_t>(a16[i] + s16) : a16[i];
      bbfu[i] = (abf[i] & 0x7FFF) > 3 ? static_cast<uint16_t>(abf[i] + sbf) : abf[i];
    }
  });
  const unsigned all = threads ? threads : driftscope::detail::hardware_threads();
  std::printf("driftscope kernel benchmark: %zu Mi elements per side, best of %d, median of %d "
              "side-by-side rounds, SIMD %s\n", n >> 20, repeat, rounds,
              driftscope::simd_target().c_str());
  std::printf("  compare_pair against the plain read (bench/plain_read.c) of the same bytes on the "
              "same threads\n");
  std::printf("  %-7s %5s %10s %13s %7s %10s  %s\n", "dtype", "threads", "read GB/s", "compare GB/s",
              "ratio", "CPU ratio", "target (ratio)");
  struct Row {
    const char* name;
    driftscope::DType dtype;
    const void* pa;
    const void* pb;
    size_t size;
    const char* target;
  };
  const Row rows[] = {{"f32", driftscope::DType::f32, a.data(), b.data(), 4, ">= 70%"},
                      {"f16", driftscope::DType::f16, a16.data(), b16.data(), 2, ">= 60%"},
                      {"bf16", driftscope::DType::bf16, abf.data(), bbf.data(), 2, ">= 60%"},
                      {"f16 ulp", driftscope::DType::f16, a16.data(), b16u.data(), 2, "(ULP-sized differences)"},
                      {"bf16ulp", driftscope::DType::bf16, abf.data(), bbfu.data(), 2, "(ULP-sized differences)"}};
  // A row's tensor pair: its description, both payloads and their bytes (Pair points at info).
  struct View {
    driftscope::TensorInfo info;
    std::span<const std::byte> pa, pb;
    double bytes = 0;
  };
  const auto view = [n](const Row& row) {
    View v;
    v.info.name = "x";
    v.info.dtype = row.dtype;
    v.info.shape = {n};
    v.pa = {static_cast<const std::byte*>(row.pa), n * row.size};
    v.pb = {static_cast<const std::byte*>(row.pb), n * row.size};
    v.bytes = 2.0 * static_cast<double>(n * row.size);
    return v;
  };
  for (const Row& row : rows) {
    if (!only.empty() && only != row.name) continue;
    const View v = view(row);
    const std::vector<Pair> pairs = {{&v.info, v.pa, &v.info, v.pb}};
    for (unsigned t : all > 1 ? std::vector<unsigned>{all, 1} : std::vector<unsigned>{1}) {
      const SideBySide m = side_by_side(pairs, {v.pa, v.pb}, v.bytes, t, repeat, rounds);
      std::printf("  %-7s %5u %10.2f %13.2f %6.1f%% %9.1f%%  %s\n", row.name, t, m.read_gbs,
                  m.cmp_gbs, 100 * m.ratio, 100 * m.cpu_ratio, t == all ? row.target : "");
    }
  }
  if (!only.empty()) return 0;
  // Per SIMD target (1 thread, input bytes per second): machines without AVX-512 run AVX2.
  std::printf("  per SIMD target, 1 thread (input bytes per second):\n");
  std::printf("    %-10s", "");
  for (size_t k = 0; k < 3; ++k) std::printf(" %10s", rows[k].name);
  std::printf("\n");
  for (const auto& t : driftscope::numerics::available_targets()) {
    driftscope::numerics::force_target(t);
    std::printf("    %-10s", t.c_str());
    for (size_t k = 0; k < 3; ++k) {  // f32, f16, bf16
      const View v = view(rows[k]);
      const std::vector<Pair> pairs = {{&v.info, v.pa, &v.info, v.pb}};
      std::printf(" %5.2f GB/s", v.bytes / compare_seconds(pairs, 1, repeat) / 1e9);
    }
    std::printf("\n");
  }
  driftscope::numerics::force_target("");
  return 0;
}

int run_pairs(const std::string& a, const std::string& b, int repeat, unsigned threads, bool json) {
  auto ra = driftscope::Reader::open(a);
  auto rb = driftscope::Reader::open(b);
  if (!ra || !rb) {
    std::fprintf(stderr, "ds_bench_kernels: %s\n",
                 (!ra ? ra.error() : rb.error()).to_string().c_str());
    return 2;
  }
  std::vector<Pair> pairs;
  std::vector<std::span<const std::byte>> spans;
  double bytes = 0;
  for (const auto& r : ra->records()) {
    if (r.kind != driftscope::RecordKind::tensor) continue;
    const auto* c = rb->find(r.info.name, r.info.occurrence, r.info.role, r.info.role_index);
    if (c == nullptr) continue;
    pairs.push_back({&r.info, r.payload, &c->info, c->payload});
    spans.push_back(r.payload);
    spans.push_back(c->payload);
    bytes += static_cast<double>(r.payload.size() + c->payload.size());
  }
  const unsigned all = threads ? threads : driftscope::detail::hardware_threads();
  // Touch every page once so that neither measurement pays for the first mapping faults.
  read_seconds(spans, all, 1);
  const double t_all = compare_seconds(pairs, all, repeat);
  const double t_one = compare_seconds(pairs, 1, repeat);
  const double t_read = read_seconds(spans, all, repeat);
  if (json) {
    std::printf("{\"pairs\": %zu, \"bytes\": %.0f, \"threads\": %u, \"seconds_all_threads\": %.6g, "
                "\"seconds_one_thread\": %.6g, \"read_seconds_all_threads\": %.6g}\n",
                pairs.size(), bytes, all, t_all, t_one, t_read);
  } else {
    std::printf("%zu pairs, %.1f MB: compare %.4f s (%u threads), %.4f s (1 thread); read %.4f s; "
                "%.1f%% of read bandwidth\n",
                pairs.size(), bytes / 1e6, t_all, all, t_one, t_read, 100 * t_read / t_all);
  }
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
  size_t mib = 256;
  int repeat = 5, rounds = 5;
  std::string only;
  unsigned threads = 0;
  bool json = false;
  std::vector<std::string> pair_files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ds_bench_kernels: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--mb") {
      mib = std::strtoull(value(), nullptr, 10);
    } else if (arg == "--repeat") {
      repeat = std::max(1, std::atoi(value()));
    } else if (arg == "--dtype") {
      only = value();
    } else if (arg == "--rounds") {
      rounds = std::max(1, std::atoi(value()));
    } else if (arg == "--threads") {
      threads = static_cast<unsigned>(std::strtoul(value(), nullptr, 10));
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--pairs") {
      pair_files.push_back(value());
      pair_files.push_back(value());
    } else {
      std::fprintf(stderr, "usage: ds_bench_kernels [--mb N] [--repeat R] [--rounds K] [--threads T] [--dtype f32|f16|bf16] "
                           "[--pairs REF.tdump CAND.tdump [--json]]\n");
      return 2;
    }
  }
  if (!pair_files.empty()) return run_pairs(pair_files[0], pair_files[1], repeat, threads, json);
  return run_synthetic(std::max<size_t>(mib, 1), repeat, threads, rounds, only);
}
