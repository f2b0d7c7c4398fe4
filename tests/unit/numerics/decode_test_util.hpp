// Helpers shared by the numerics tests: building payloads and TensorInfos, and running a check on
// every SIMD target Highway compiled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "driftscope/tensor.hpp"

namespace driftscope::test {

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());  // tests run on little-endian
  return out;
}

inline TensorInfo make_info(DType dtype, std::vector<uint64_t> shape, std::string name = "t") {
  TensorInfo info;
  info.name = std::move(name);
  info.dtype = dtype;
  info.shape = std::move(shape);
  return info;
}

// Runs `body` once per compiled and supported SIMD target, with that target forced.
inline void for_each_target(const std::function<void()>& body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

inline uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

}  // namespace driftscope::test
