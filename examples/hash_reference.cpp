// hash_reference: rebuilds reference weights with the hash initialiser (docs/references.md) and
// runs one small layer, relu(x W^T + b) of a Linear(16 -> 8), the way a C++ port would check
// itself against PyTorch without a checkpoint. Writes OUT.tdump with the weights, the input and
// the layer's output in float64 and float32.
//
// The names and scales are those driftscope.reference.hash_init_ gives
// torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()): "0.weight", "0.bias", std
// 1/sqrt(3 * 16), uniform; the input is hash_integers("input", (2, 16), -8, 8). Integer inputs
// times float32 weights, summed in float64, are exact, so the output is bit-identical to PyTorch's
// float64 Linear on the same weights whatever order its kernel sums in
// (tests/python/test_reference.py checks it).
//
//   hash_reference OUT.tdump
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "driftscope/reference.hpp"
#include "driftscope/writer.hpp"

namespace ds = driftscope;
namespace ref = driftscope::reference;

namespace {

constexpr size_t kIn = 16, kOut = 8, kBatch = 2;

template <class T>
bool put(ds::Writer& w, const std::string& name, ds::Role role, ds::DType dt,
         std::vector<uint64_t> shape, const std::vector<T>& v) {
  ds::TensorInfo info;
  info.name = name;
  info.role = role;
  info.dtype = dt;
  info.op_type = role == ds::Role::output ? "Sequential" : "";
  info.shape = std::move(shape);
  auto r = w.write(info, std::as_bytes(std::span<const T>(v)));
  if (!r) std::fprintf(stderr, "hash_reference: error: %s\n", r.error().to_string().c_str());
  return r.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hash_reference OUT.tdump\n");
    return 2;
  }
  // PyTorch's Linear default: bound 1/sqrt(fan_in), i.e. std 1/sqrt(3 fan_in) (docs/references.md).
  const double sd = 1.0 / std::sqrt(3.0 * static_cast<double>(kIn));
  std::vector<float> weight(kOut * kIn), bias(kOut);
  std::vector<int64_t> ids(kBatch * kIn);
  if (!ref::hash_fill("0.weight", ref::Distribution::uniform, sd, std::span<float>(weight)) ||
      !ref::hash_fill("0.bias", ref::Distribution::uniform, sd, std::span<float>(bias)) ||
      !ref::hash_fill_integers("input", -8, 8, std::span<int64_t>(ids))) {
    std::fprintf(stderr, "hash_reference: error: the hash initialiser refused its arguments\n");
    return 2;
  }
  std::vector<float> x(ids.begin(), ids.end());
  std::vector<double> y64(kBatch * kOut);
  std::vector<float> y32(kBatch * kOut);
  for (size_t b = 0; b < kBatch; ++b)
    for (size_t o = 0; o < kOut; ++o) {
      double acc = bias[o];
      for (size_t i = 0; i < kIn; ++i)
        acc += static_cast<double>(weight[o * kIn + i]) * static_cast<double>(x[b * kIn + i]);
      y64[b * kOut + o] = acc > 0 ? acc : 0.0;
      y32[b * kOut + o] = static_cast<float>(y64[b * kOut + o]);
    }

  ds::WriterOptions opts;
  opts.metadata = {{"framework", "driftscope hash_reference example (c++)"},
                   {"reference.init", "driftscope-hash/1 seed 0"}};
  auto writer = ds::Writer::create(argv[1], opts);
  if (!writer) {
    std::fprintf(stderr, "hash_reference: error: %s\n", writer.error().to_string().c_str());
    return 2;
  }
  ds::Writer& w = **writer;
  bool ok = put(w, "0.weight", ds::Role::parameter, ds::DType::f32, {kOut, kIn}, weight) &&
            put(w, "0.bias", ds::Role::parameter, ds::DType::f32, {kOut}, bias) &&
            put(w, "input", ds::Role::input, ds::DType::f32, {kBatch, kIn}, x) &&
            put(w, "output.float64", ds::Role::output, ds::DType::f64, {kBatch, kOut}, y64) &&
            put(w, "output.float32", ds::Role::output, ds::DType::f32, {kBatch, kOut}, y32);
  auto closed = w.close();
  if (!closed) {
    std::fprintf(stderr, "hash_reference: error: %s\n", closed.error().to_string().c_str());
    return 2;
  }
  return ok ? 0 : 2;
}
