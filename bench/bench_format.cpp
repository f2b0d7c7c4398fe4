// Format benchmarks (issue 2 §8), printed as ratios measured side by side in one run:
//   1. Writer throughput vs a plain sequential write() of the same payload bytes (target >= 0.8).
//   2. Reader scan + CRC verification of a cached file, single thread (target >= 2 GB/s).
// Usage: bench_format [total_MiB=512] [tensor_KiB=1024] [dir=/tmp]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"

using namespace driftscope;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  const uint64_t total = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 512) << 20;
  const uint64_t tensor = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024) << 10;
  const std::string dir = argc > 3 ? argv[3] : "/tmp";
  const uint64_t count = total / tensor;
  std::vector<float> data(tensor / 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 1000) * 0.001f;
  const std::string plain_path = dir + "/ds-bench-plain.bin", tdump_path = dir + "/ds-bench.tdump";

  double best_plain = 1e9, best_writer = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    // Plain sequential write() of the same payload bytes, fdatasync at the end.
    auto t0 = Clock::now();
    int fd = ::open(plain_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (uint64_t i = 0; i < count; ++i) {
      const char* p = reinterpret_cast<const char*>(data.data());
      size_t left = tensor;
      while (left) {
        ssize_t n = ::write(fd, p, left);
        if (n <= 0) return 2;
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    ::fdatasync(fd);
    ::close(fd);
    best_plain = std::min(best_plain, seconds_since(t0));

    // The TDUMP writer: framing, metadata, CRC-32 of every byte, index; sync on close.
    t0 = Clock::now();
    auto w = Writer::create(tdump_path, {});
    if (!w.ok()) return 2;
    TensorInfo t;
    t.dtype = DType::f32;
    t.shape = {tensor / 4};
    t.op_type = "Linear";
    t.axes = {"hidden"};
    for (uint64_t i = 0; i < count; ++i) {
      t.name = "encoder.layers." + std::to_string(i % 32) + ".mlp.fc" + std::to_string(i / 32);
      if (!(*w)->write(t, std::as_bytes(std::span<const float>(data))).ok()) return 2;
    }
    if (!(*w)->close().ok()) return 2;
    best_writer = std::min(best_writer, seconds_since(t0));
  }

  // Reader: full scan (no index) with every record checksum verified, file in the page cache.
  double best_read = 1e9;
  uint64_t file_size = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    OpenOptions o;
    o.use_index = false;
    o.verify = Verify::full;
    auto r = Reader::open(tdump_path, o);
    if (!r.ok() || r->records().size() != count) return 2;
    file_size = r->integrity().file_size;
    best_read = std::min(best_read, seconds_since(t0));
  }
  double gb = static_cast<double>(total) / 1e9;
  std::printf("payload: %llu tensors x %llu KiB = %.2f GB\n", static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(tensor >> 10), gb);
  std::printf("plain write():        %7.2f GB/s\n", gb / best_plain);
  std::printf("driftscope Writer:    %7.2f GB/s\n", gb / best_writer);
  std::printf("writer / plain ratio: %7.2f   (target >= 0.80)\n", best_plain / best_writer);
  std::printf("reader scan+verify:   %7.2f GB/s single thread (target >= 2.0)\n",
              static_cast<double>(file_size) / 1e9 / best_read);
  ::unlink(plain_path.c_str());
  ::unlink(tdump_path.c_str());
  return 0;
}
