// Writes a dump with the installed C++ API and reads it back. Exit 0 on success.
#include <cstdio>
#include <vector>

#include <driftscope/reader.hpp>
#include <driftscope/writer.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::vector<float> v = {1.0f, 2.0f, 3.0f};
  driftscope::TensorInfo t;
  t.name = "consumer.out";
  t.shape = {3};
  auto w = driftscope::Writer::create(argv[1]);
  if (!w.ok() || !(*w)->write(t, std::as_bytes(std::span<const float>(v))).ok() || !(*w)->close().ok()) return 1;
  auto r = driftscope::Reader::open(argv[1]);
  if (!r.ok() || r->records().size() != 1 || r->find("consumer.out") == nullptr) return 1;
  std::printf("consumer_cpp ok: %zu record\n", r->records().size());
  return 0;
}
