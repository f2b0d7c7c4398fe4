// The footer index against names chosen to collide (issue 23 item 4), printed as growth ratios
// measured side by side in one run: write, verify (open with every check, the footer index's
// included) and open + look up every name, at N and 4N records, for ordinary names and for names
// whose FNV-1a-64 hashes share their low 24 bits (one linear-probing cluster of the whole table).
// Linear work grows 4x from N to 4N; the probing loops this replaced grew 16x.
// Usage: bench_index [N=200000] [dir=/tmp] [--keep]   (--keep leaves the four dumps in dir for
// the Java and Python rows of scripts/bench.sh: ds-bench-index-{plain,adv}-{N,4N}.tdump)
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"

using namespace driftscope;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Names whose FNV-1a-64 hashes agree in their low `bits` bits, built as a multicollision: the low
// k bits of FNV-1a's state depend only on the low k bits of the state before (xor, then multiply
// mod 2^64), so a pair of 4-character blocks that collide there from one state (a birthday search,
// ~2^(bits/2) tries) can be chosen independently at each of t stages, giving 2^t names.
std::vector<std::string> colliding_names(size_t n, int bits) {
  const uint64_t mask = (uint64_t{1} << bits) - 1, prime = 0x100000001b3ull;
  const std::string prefix = "adv.";
  uint64_t state = 0xcbf29ce484222325ull;
  for (unsigned char c : prefix) state = (state ^ c) * prime;
  size_t stages = 0;
  while ((size_t{1} << stages) < n) ++stages;
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t st = 0; st < stages; ++st) {
    std::unordered_map<uint64_t, std::string> seen;
    for (uint32_t c = 0;; ++c) {
      std::string block(4, ' ');
      for (int k = 0; k < 4; ++k) block[k] = alphabet[(c / (k == 0 ? 1 : k == 1 ? 36 : k == 2 ? 1296 : 46656)) % 36];
      uint64_t h = state;
      for (unsigned char ch : block) h = (h ^ ch) * prime;
      auto [it, fresh] = seen.emplace(h & mask, block);
      if (!fresh) {
        pairs.emplace_back(it->second, block);
        state = h;  // either block: their low bits, all the next stage depends on, agree
        break;
      }
    }
  }
  std::vector<std::string> names(n, prefix);
  for (size_t i = 0; i < n; ++i)
    for (size_t st = 0; st < stages; ++st) names[i] += (i >> st) & 1 ? pairs[st].second : pairs[st].first;
  return names;
}

std::vector<std::string> ordinary_names(size_t n) {
  std::vector<std::string> names;
  names.reserve(n);
  for (size_t i = 0; i < n; ++i) names.push_back("encoder.layers." + std::to_string(i) + ".out");
  return names;
}

struct Times {
  double write = 0, verify = 0, lookup = 0;
};

Times run(const std::vector<std::string>& names, const std::string& path) {
  Times t;
  const float v = 1.0f;
  auto t0 = Clock::now();
  {
    auto w = Writer::create(path, WriterOptions{});
    if (!w) { std::fprintf(stderr, "%s\n", w.error().to_string().c_str()); std::exit(1); }
    TensorInfo info;
    info.dtype = DType::f32;
    info.shape = {1};
    for (const std::string& n : names) {
      info.name = n;
      if (auto r = (*w)->write(info, std::as_bytes(std::span<const float>(&v, 1))); !r) {
        std::fprintf(stderr, "%s\n", r.error().to_string().c_str());
        std::exit(1);
      }
    }
    if (auto c = (*w)->close(); !c) { std::fprintf(stderr, "%s\n", c.error().to_string().c_str()); std::exit(1); }
  }
  t.write = seconds_since(t0);
  t0 = Clock::now();
  {
    auto r = Reader::open(path);
    if (!r || r->integrity().state != FileState::clean) { std::fprintf(stderr, "verify failed\n"); std::exit(1); }
  }
  t.verify = seconds_since(t0);
  t0 = Clock::now();
  {
    auto r = Reader::open(path, {Verify::frames, true, false});
    size_t found = 0;
    for (const std::string& n : names) found += r->find(n) != nullptr;
    if (found != names.size()) { std::fprintf(stderr, "lookup found %zu of %zu\n", found, names.size()); std::exit(1); }
  }
  t.lookup = seconds_since(t0);
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  size_t n = 200000;
  std::string dir = "/tmp";
  bool keep = false;
  int pos = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--keep") == 0) keep = true;
    else if (pos++ == 0) n = std::strtoull(argv[i], nullptr, 10);
    else dir = argv[i];
  }
  std::printf("%-12s %9s %10s %10s %14s\n", "names", "records", "write s", "verify s", "open+lookup s");
  for (const char* kind : {"plain", "adv"}) {
    Times at[2];
    for (int k = 0; k < 2; ++k) {
      const size_t count = k == 0 ? n : 4 * n;
      const auto names = std::strcmp(kind, "adv") == 0 ? colliding_names(count, 24) : ordinary_names(count);
      const std::string path = dir + "/ds-bench-index-" + kind + "-" + (k == 0 ? "N" : "4N") + ".tdump";
      at[k] = run(names, path);
      std::printf("%-12s %9zu %10.3f %10.3f %14.3f\n", kind, count, at[k].write, at[k].verify, at[k].lookup);
      if (!keep) std::remove(path.c_str());
    }
    std::printf("%-12s %9s %9.1fx %9.1fx %13.1fx   (4N/N: linear 4x, quadratic 16x)\n", kind, "growth",
                at[1].write / at[0].write, at[1].verify / at[0].verify, at[1].lookup / at[0].lookup);
  }
  return 0;
}
