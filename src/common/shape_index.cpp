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
  // Stride, in the candidate, of each reference axis; then walk the reference in row-major order
  // with an odometer, so each step costs O(1) amortised.
  std::vector<uint64_t> step(rank);
  for (size_t i = 0; i < rank; ++i) step[i] = cand_stride[permutation[i]];
  uint64_t n = 1;
  for (uint64_t d : ref_shape) n *= d;
  std::vector<uint64_t> out(n);
  std::vector<uint64_t> coord(rank, 0);
  uint64_t off = 0;
  for (uint64_t i = 0; i < n; ++i) {
    out[i] = off;
    for (size_t ax = rank; ax-- > 0;) {
      if (++coord[ax] < ref_shape[ax]) {
        off += step[ax];
        break;
      }
      off -= step[ax] * (ref_shape[ax] - 1);
      coord[ax] = 0;
    }
  }
  return out;
}

}  // namespace driftscope::detail
