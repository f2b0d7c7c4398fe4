#include "common/shape_index.hpp"

#include <algorithm>

namespace driftscope::detail {

void unravel(uint64_t flat, std::span<const uint64_t> shape, uint64_t* out) noexcept {
  std::fill(out, out + shape.size(), uint64_t{0});
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return;
    out[i] = flat % shape[i];
    flat /= shape[i];
  }
}

std::vector<uint64_t> unravel(uint64_t flat, std::span<const uint64_t> shape) {
  std::vector<uint64_t> c(shape.size());
  unravel(flat, shape, c.data());
  return c;
}

std::vector<uint64_t> permuted_index(const std::vector<uint64_t>& ref_shape, const std::vector<uint64_t>& cand_shape,
                                     const std::vector<uint32_t>& permutation) {
  const size_t rank = ref_shape.size();
  std::vector<uint64_t> cand_stride(rank, 1);
  for (size_t i = rank; i-- > 1;) cand_stride[i - 1] = cand_stride[i] * cand_shape[i];
  // Stride, in the candidate, of each reference axis; then walk the reference in row-major order.
  std::vector<uint64_t> step(rank);
  for (size_t i = 0; i < rank; ++i) step[i] = cand_stride[permutation[i]];
  uint64_t n = 1;
  for (uint64_t d : ref_shape) n *= d;
  std::vector<uint64_t> out(n);
  for_each_strided(ref_shape, step, [&](uint64_t i, uint64_t off) { out[i] = off; });
  return out;
}

}  // namespace driftscope::detail
