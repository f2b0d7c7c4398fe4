// Import/export scaling with the number of tensors (issue 7, bug 7: a safetensors header of
// 80,000 keys took 13 s, quadratic). Prints the time per key at 10k/20k/40k/80k keys for
// `import` of a safetensors file, `import` of an .npz and `export` to safetensors, and each
// size's per-key time over the 10k one: near-linear work keeps that ratio near 1 (a quadratic
// one doubles it with each doubling).
// Usage: bench_interop [dir=/tmp] [max_keys=80000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driftscope/interop.hpp"
#include "driftscope/writer.hpp"

using namespace driftscope;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A safetensors file of n tensors of 4 floats each, names like real checkpoints use.
bool write_safetensors(const std::string& path, uint64_t n) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (uint64_t i = 0; i < n; ++i)
    header += "," "\"model.layers." + std::to_string(i / 8) + ".mlp.w" + std::to_string(i % 8) +
              ".weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[" +
              std::to_string(i * 16) + "," + std::to_string(i * 16 + 16) + "]}";
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  uint64_t len = header.size();
  std::fwrite(&len, 8, 1, f);  // little-endian host (x86-64, aarch64)
  std::fwrite(header.data(), 1, header.size(), f);
  std::vector<float> data(4 * n, 0.5f);
  std::fwrite(data.data(), 4, data.size(), f);
  return std::fclose(f) == 0;
}

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    if (!f()) return -1;
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp";
  const uint64_t max_keys = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 80000;
  const std::string st = dir + "/ds-bench-interop.safetensors", td = dir + "/ds-bench-interop.tdump",
                    npz = dir + "/ds-bench-interop.npz", st2 = dir + "/ds-bench-interop-out.safetensors",
                    td2 = dir + "/ds-bench-interop-2.tdump";
  std::printf("%8s  %-28s %-28s %-28s\n", "keys", "import safetensors", "import npz",
              "export safetensors");
  std::printf("%8s  %-28s %-28s %-28s\n", "", "us/key  (ratio to 10k)", "us/key  (ratio to 10k)",
              "us/key  (ratio to 10k)");
  double base[3] = {0, 0, 0};
  for (uint64_t n = 10000; n <= max_keys; n *= 2) {
    if (!write_safetensors(st, n)) {
      std::fprintf(stderr, "cannot write %s\n", st.c_str());
      return 1;
    }
    ImportOptions io;
    io.fixed_salt = true;
    double t[3];
    t[0] = best_of(3, [&] { return import_file(st, td, io).ok(); });
    // The .npz of the same tensors (written by export), imported back.
    if (!export_file(td, npz).ok()) return 1;
    t[1] = best_of(3, [&] { return import_file(npz, td2, io).ok(); });
    t[2] = best_of(3, [&] { return export_file(td, st2).ok(); });
    std::printf("%8llu ", static_cast<unsigned long long>(n));
    for (int k = 0; k < 3; ++k) {
      if (t[k] < 0) {
        std::printf(" %-28s", "failed");
        continue;
      }
      double per = t[k] / static_cast<double>(n) * 1e6;
      if (n == 10000) base[k] = per;
      char cell[64];
      std::snprintf(cell, sizeof cell, "%7.2f  (%.2fx)", per, per / base[k]);
      std::printf(" %-28s", cell);
    }
    std::printf("\n");
  }
  for (const auto& p : {st, td, npz, st2, td2}) std::remove(p.c_str());
  return 0;
}
