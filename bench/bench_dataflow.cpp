// Origins on the data flow at N and 4N, side by side (issue 23 items 4 and 5).
//
//   ds_bench_dataflow [--origins N] [--hub M] [--hub-inputs K] [--hub-repeat R] BIN [BIN...]
//
// --origins: two dumps of N small f32 tensors, each with an empty `ds.inputs` (recorded, no
// inputs) and the candidate far off, so every pair fails on its own: N independent origins. The
// reach of each origin used to be found by a pass over every pair per 64 origins (N^2 / 64 steps:
// 160k origins, 25.8 s); linear work makes the 4N run about 4x the N run.
// --hub: K compared tensors, one reference-only tensor (the hub) naming all K as inputs, and M
// compared tensors each naming the hub R times. Followed through the hub each of the M got all K
// inputs, R times over, kept at that capacity after deduplication: RSS grew as M * K * R. With the
// hub's inputs resolved once and shared, RSS stays near the dumps' size and the 4M run costs about
// what the M run does.
// Each BIN runs `compare A B -q`; the table prints seconds (wall), CPU seconds and peak RSS per
// size, then the 4x/1x ratio. Give an old and a new build to see a change side by side.
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

// (not named("t", i): GCC 12 warns a false -Wrestrict on it, and warnings are errors)
std::string named(const char* prefix, size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

bool put(Writer& w, const std::string& name, const std::vector<TensorRef>& from, float scale, size_t salt) {
  float v[4];
  for (size_t k = 0; k < 4; ++k) v[k] = static_cast<float>((salt * 31 + k * 7) % 97) * scale + 1.0f;
  TensorInfo t;
  t.name = name;
  t.op_type = "Linear";
  t.dtype = DType::f32;
  t.shape = {4};
  t.attrs = {{"ds.inputs", format_inputs(from)}, {"ds.kind", "float"}};
  auto r = w.write(t, std::as_bytes(std::span<const float>(v, 4)));
  if (!r) std::fprintf(stderr, "%s: %s\n", name.c_str(), r.error().message.c_str());
  return static_cast<bool>(r);
}

// N unconnected origins: every pair fails (the candidate is 3x off) and names no input.
bool write_origins(const std::string& path, size_t n, float scale) {
  auto w = Writer::create(path);
  if (!w) return false;
  for (size_t i = 0; i < n; ++i)
    if (!put(**w, named("t", i), {}, scale, i)) return false;
  return static_cast<bool>((*w)->close());
}

// K inputs, the hub (reference only), M consumers naming the hub R times each.
bool write_hub(const std::string& path, size_t m, size_t k, size_t r, bool reference) {
  auto w = Writer::create(path);
  if (!w) return false;
  std::vector<TensorRef> ins;
  for (size_t i = 0; i < k; ++i) {
    ins.push_back({named("p", i)});
    if (!put(**w, std::string(ins.back().name()), {}, 1.0f, i)) return false;
  }
  if (reference && !put(**w, "hub", ins, 1.0f, 0)) return false;
  std::vector<TensorRef> hub(r, TensorRef{"hub"});
  for (size_t i = 0; i < m; ++i)
    if (!put(**w, named("c", i), hub, reference ? 1.0f : 1.5f, i)) return false;
  return static_cast<bool>((*w)->close());
}

struct Cell {
  dsbench::ChildRun run;
  bool ok() const { return run.exit_code >= 0 && run.exit_code != 2; }
};

void print_row(const char* label, size_t size, const std::vector<Cell>& cells) {
  std::printf("%-10s %9zu", label, size);
  for (const auto& c : cells) {
    if (c.ok()) std::printf("   %8.2f s %8.2f cpu %8.1f MiB", c.run.wall, c.run.cpu, c.run.rss_mib);
    else std::printf("   %38s", "failed");
  }
  std::printf("\n");
}

void print_ratio(const std::vector<Cell>& one, const std::vector<Cell>& four) {
  std::printf("%-10s %9s", "4x / 1x", "");
  for (size_t b = 0; b < one.size(); ++b) {
    if (!one[b].ok() || !four[b].ok()) {
      std::printf("   %38s", "-");
      continue;
    }
    std::printf("   %8.2fx  %8.2fx cpu %8.2fx RSS", four[b].run.wall / one[b].run.wall,
                four[b].run.cpu / std::max(one[b].run.cpu, 1e-3), four[b].run.rss_mib / one[b].run.rss_mib);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  size_t origins = 40000, hub_m = 250, hub_k = 3000, hub_r = 16;
  std::vector<std::string> bins;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--origins" && i + 1 < argc) origins = std::strtoull(argv[++i], nullptr, 10);
    else if (s == "--hub" && i + 1 < argc) hub_m = std::strtoull(argv[++i], nullptr, 10);
    else if (s == "--hub-inputs" && i + 1 < argc) hub_k = std::strtoull(argv[++i], nullptr, 10);
    else if (s == "--hub-repeat" && i + 1 < argc) hub_r = std::strtoull(argv[++i], nullptr, 10);
    else bins.push_back(s);
  }
  if (bins.empty()) {
    std::fprintf(stderr, "usage: ds_bench_dataflow [--origins N] [--hub M] [--hub-inputs K] [--hub-repeat R] BIN [BIN...]\n");
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("ds_bench_dataflow." + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto run_all = [&](const std::string& a, const std::string& c) {
    std::vector<Cell> cells;
    for (const auto& b : bins) {
      std::fflush(stdout);  // or the child's freopen writes this process's buffered lines again
      cells.push_back({dsbench::run_child({b, "compare", a, c, "-q"})});
    }
    return cells;
  };
  int rc = 0;
  if (origins > 0) {
    std::printf("origins: N failing pairs with no inputs (N independent origins); compare -q\n");
    std::vector<std::vector<Cell>> rows;
    for (size_t n : {origins, 4 * origins}) {
      const std::string a = (dir / named("oa", n)).string(), c = (dir / named("oc", n)).string();
      if (!write_origins(a, n, 1.0f) || !write_origins(c, n, 3.0f)) {
        std::fprintf(stderr, "cannot write the dumps in %s\n", dir.c_str());
        rc = 1;
        break;
      }
      rows.push_back(run_all(a, c));
      print_row("N", n, rows.back());
      fs::remove(a), fs::remove(c);
    }
    if (rows.size() == 2) print_ratio(rows[0], rows[1]);
  }
  if (hub_m > 0 && rc == 0) {
    std::printf("hub: %zu inputs -> one reference-only tensor -> M consumers naming it %zu times; compare -q\n",
                hub_k, hub_r);
    std::vector<std::vector<Cell>> rows;
    for (size_t m : {hub_m, 4 * hub_m}) {
      const std::string a = (dir / named("ha", m)).string(), c = (dir / named("hc", m)).string();
      if (!write_hub(a, m, hub_k, hub_r, true) || !write_hub(c, m, hub_k, hub_r, false)) {
        std::fprintf(stderr, "cannot write the dumps in %s\n", dir.c_str());
        rc = 1;
        break;
      }
      std::printf("           (dumps: %.1f MiB + %.1f MiB)\n", static_cast<double>(fs::file_size(a)) / (1 << 20),
                  static_cast<double>(fs::file_size(c)) / (1 << 20));
      rows.push_back(run_all(a, c));
      print_row("M", m, rows.back());
      fs::remove(a), fs::remove(c);
    }
    if (rows.size() == 2) print_ratio(rows[0], rows[1]);
  }
  fs::remove_all(dir);
  return rc;
}
