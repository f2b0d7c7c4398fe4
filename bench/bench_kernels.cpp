// ds_bench_kernels: throughput of compare_pair against plain memory-read bandwidth, measured in
// the same run on the same bytes (issue 3 §6: target >= 70% with all cores).
//
//   ds_bench_kernels [--mb N] [--repeat R] [--threads T]
//       synthetic f32 pair of N MiB per side (default 256): bandwidth, compare_pair at all
//       threads and at 1 thread, and every SIMD target
//   ds_bench_kernels --pairs REF.tdump CAND.tdump [--repeat R] [--threads T] [--json]
//       every same-named tensor pair of two dumps (used by bench/compare_vs_numpy.py)
//
// Times are the best of R runs (default 5): the least disturbed run on a shared machine.
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
#include "driftscope/reader.hpp"
#include "numerics/pair_metrics.hpp"

namespace {

using driftscope::numerics::PairOptions;
using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int repeat, F&& f) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

volatile uint64_t g_sink;

// Plain read bandwidth: every 8-byte word of the spans is loaded once and folded into eight
// independent sums (enough to keep the load ports, not the adder, the bottleneck). The spans are
// cut into 1 MiB blocks that the same thread pool distributes.
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
        [&](size_t b) {
          uint64_t acc[8] = {};
          const std::byte* p = blocks[b].p;
          const size_t words = blocks[b].n / 8;
          size_t i = 0;
          for (; i + 8 <= words; i += 8)
            for (int k = 0; k < 8; ++k) {
              uint64_t w;
              std::memcpy(&w, p + 8 * (i + k), 8);
              acc[k] += w;
            }
          for (; i < words; ++i) {
            uint64_t w;
            std::memcpy(&w, p + 8 * i, 8);
            acc[0] += w;
          }
          sums[b] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
        },
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

int run_synthetic(size_t mib, int repeat, unsigned threads) {
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
  driftscope::TensorInfo info;
  info.name = "x";
  info.dtype = driftscope::DType::f32;
  info.shape = {n};
  const std::span<const std::byte> pa(reinterpret_cast<const std::byte*>(a.data()), n * 4);
  const std::span<const std::byte> pb(reinterpret_cast<const std::byte*>(b.data()), n * 4);
  const std::vector<Pair> pairs = {{&info, pa, &info, pb}};
  const double bytes = 2.0 * static_cast<double>(n) * 4;
  const unsigned all = threads ? threads : driftscope::detail::hardware_threads();

  std::printf("driftscope kernel benchmark: f32 pair, %zu MiB per side, best of %d, %u threads\n",
              mib, repeat, all);
  const double bw_all = bytes / read_seconds({pa, pb}, all, repeat) / 1e9;
  const double bw_one = bytes / read_seconds({pa, pb}, 1, repeat) / 1e9;
  const double cp_all = bytes / compare_seconds(pairs, all, repeat) / 1e9;
  const double cp_one = bytes / compare_seconds(pairs, 1, repeat) / 1e9;
  std::printf("  memory read, %2u threads     %7.2f GB/s\n", all, bw_all);
  std::printf("  compare_pair, %2u threads    %7.2f GB/s  = %5.1f%% of read bandwidth (target >= 70%%)\n",
              all, cp_all, 100 * cp_all / bw_all);
  std::printf("  memory read, 1 thread       %7.2f GB/s\n", bw_one);
  std::printf("  compare_pair, 1 thread      %7.2f GB/s  = %5.1f%% of 1-thread read bandwidth\n",
              cp_one, 100 * cp_one / bw_one);
  std::printf("  per SIMD target, 1 thread (input bytes per second):\n");
  for (const auto& t : driftscope::numerics::available_targets()) {
    driftscope::numerics::force_target(t);
    std::printf("    %-10s %7.2f GB/s\n", t.c_str(), bytes / compare_seconds(pairs, 1, repeat) / 1e9);
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
  size_t mib = 256;
  int repeat = 5;
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
    } else if (arg == "--threads") {
      threads = static_cast<unsigned>(std::strtoul(value(), nullptr, 10));
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--pairs") {
      pair_files.push_back(value());
      pair_files.push_back(value());
    } else {
      std::fprintf(stderr, "usage: ds_bench_kernels [--mb N] [--repeat R] [--threads T] "
                           "[--pairs REF.tdump CAND.tdump [--json]]\n");
      return 2;
    }
  }
  if (!pair_files.empty()) return run_pairs(pair_files[0], pair_files[1], repeat, threads, json);
  return run_synthetic(std::max<size_t>(mib, 1), repeat, threads);
}
