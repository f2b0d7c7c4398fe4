// Flat row-major indexes and coordinates of a shape: the one implementation for the engine
// (worst elements, permuted candidates), the single-run check and the JSON report.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace driftscope::detail {

// The row-major coordinates of `flat` in `shape`, written to out[0, shape.size()). When an axis
// is 0 (no element exists) the axes from it leftwards stay 0.
void unravel(uint64_t flat, std::span<const uint64_t> shape, uint64_t* out) noexcept;
std::vector<uint64_t> unravel(uint64_t flat, std::span<const uint64_t> shape);

// Walks `shape` in row-major order, calling f(i, offset) for element i with offset =
// Σ_k coord_k · stride[k], whatever the strides (a transposed view, Fortran order): an odometer,
// O(1) amortised per element. Nothing is called when an axis is 0.
template <class F>
void for_each_strided(std::span<const uint64_t> shape, std::span<const uint64_t> stride, F&& f) {
  const size_t rank = shape.size();
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::vector<uint64_t> coord(rank, 0);
  uint64_t off = 0;
  for (uint64_t i = 0; i < n; ++i) {
    f(i, off);
    for (size_t ax = rank; ax-- > 0;) {
      if (++coord[ax] < shape[ax]) {
        off += stride[ax];
        break;
      }
      off -= stride[ax] * (shape[ax] - 1);
      coord[ax] = 0;
    }
  }
}

// For each flat index of the reference (row-major in ref_shape), the flat index of the same
// element in the candidate (row-major in cand_shape), where reference axis i is candidate axis
// permutation[i] (cand_shape[permutation[i]] == ref_shape[i]).
std::vector<uint64_t> permuted_index(const std::vector<uint64_t>& ref_shape, const std::vector<uint64_t>& cand_shape,
                                     const std::vector<uint32_t>& permutation);

}  // namespace driftscope::detail
