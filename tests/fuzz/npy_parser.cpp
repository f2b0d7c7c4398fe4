// libFuzzer target for the .npy header grammar and array layout (interop::parse_npy): strict
// dict parsing, dtype table, shape arithmetic, byte swapping and Fortran-order transposition,
// over borrowed bytes and over owned (inflated) bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "interop/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  volatile uint64_t sink = 0;
  auto a = interop::parse_npy(bytes, "array");
  if (a.ok())
    for (std::byte b : a->data) sink = sink + static_cast<uint64_t>(b);
  std::vector<std::byte> owned(bytes.begin(), bytes.end());
  auto b = interop::parse_npy(std::move(owned), "member");
  if (a.ok() != b.ok()) __builtin_trap();  // the two entry points must judge alike
  if (b.ok()) {
    if (b->data.size() != a->data.size() || b->shape != a->shape ||
        (!b->data.empty() && std::memcmp(b->data.data(), a->data.data(), b->data.size()) != 0))
      __builtin_trap();
  }
  (void)sink;
  return 0;
}
