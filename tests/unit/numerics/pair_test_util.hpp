// Helpers shared by the pair-metric tests: tensors from plain vectors, and bitwise comparison of
// two PairMetrics.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "driftscope/decode.hpp"
#include "driftscope/tensor.hpp"
#include "numerics/pair_metrics.hpp"

namespace driftscope::numerics::testing {

struct Tensor {
  TensorInfo info;
  std::vector<std::byte> bytes;
  std::span<const std::byte> payload() const { return bytes; }
};

template <class T>
inline Tensor make_tensor(DType dtype, const std::vector<T>& values, std::vector<uint64_t> shape) {
  Tensor t;
  t.info.name = "t";
  t.info.dtype = dtype;
  t.info.shape = std::move(shape);
  t.bytes.reserve(values.size() * sizeof(T));
  for (const T& v : values) {  // host order: the tests run on little-endian machines
    const auto b = std::bit_cast<std::array<std::byte, sizeof(T)>>(v);
    t.bytes.insert(t.bytes.end(), b.begin(), b.end());
  }
  return t;
}

inline Tensor f64(const std::vector<double>& v) { return make_tensor(DType::f64, v, {v.size()}); }
inline Tensor f32(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return make_tensor(DType::f32, f, {v.size()});
}
inline Tensor f16(const std::vector<double>& v) {
  std::vector<uint16_t> h;
  for (double x : v) h.push_back(double_to_f16(x));
  return make_tensor(DType::f16, h, {v.size()});
}
inline Tensor bf16(const std::vector<double>& v) {
  std::vector<uint16_t> h;
  for (double x : v) h.push_back(double_to_bf16(x));
  return make_tensor(DType::bf16, h, {v.size()});
}

inline Result<PairMetrics> run(const Tensor& a, const Tensor& b, const PairOptions& o = {}) {
  return compare_pair(a.info, a.payload(), b.info, b.payload(), o);
}

inline uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

// Every field, bit for bit (NaN payloads included).
inline void expect_identical(const PairMetrics& a, const PairMetrics& b, const std::string& what) {
  SCOPED_TRACE(what);
#define DS_EQ_U(f) EXPECT_EQ(a.f, b.f) << #f
#define DS_EQ_D(f) EXPECT_EQ(bits(a.f), bits(b.f)) << #f << ": " << a.f << " vs " << b.f
  DS_EQ_U(count); DS_EQ_U(nan_ref); DS_EQ_U(nan_cand); DS_EQ_U(nan_both);
  DS_EQ_U(inf_ref); DS_EQ_U(inf_cand); DS_EQ_U(inf_same); DS_EQ_U(nan_positions_match);
  DS_EQ_U(inf_positions_match); DS_EQ_U(finite_pairs);
  DS_EQ_D(max_abs_diff); DS_EQ_D(mean_abs_diff); DS_EQ_D(rmse); DS_EQ_D(max_rel_diff);
  DS_EQ_D(cosine); DS_EQ_D(sqnr_db); DS_EQ_D(nmse); DS_EQ_D(rel_l2); DS_EQ_D(norm_ref);
  DS_EQ_D(norm_cand); DS_EQ_D(sum_ref); DS_EQ_D(sum_cand); DS_EQ_D(sumsq_ref);
  DS_EQ_D(sumsq_cand); DS_EQ_D(dot); DS_EQ_D(sumsq_diff); DS_EQ_D(min_ref); DS_EQ_D(max_ref);
  DS_EQ_D(min_cand); DS_EQ_D(max_cand); DS_EQ_U(zero_ref); DS_EQ_U(zero_cand);
  DS_EQ_U(const_ref); DS_EQ_U(const_cand); DS_EQ_U(mismatch_count); DS_EQ_D(mismatch_fraction);
  DS_EQ_U(first_mismatch); DS_EQ_D(first_mismatch_ref); DS_EQ_D(first_mismatch_cand);
  DS_EQ_U(max_abs_index); DS_EQ_D(max_abs_ref); DS_EQ_D(max_abs_cand); DS_EQ_U(max_ulp);
  DS_EQ_U(rows); DS_EQ_D(argmax_agreement); DS_EQ_D(topk_overlap);
#undef DS_EQ_U
#undef DS_EQ_D
}

}  // namespace driftscope::numerics::testing
