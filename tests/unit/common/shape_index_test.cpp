// common/shape_index.hpp: row-major coordinates and the permuted candidate index, against the
// flat index recomputed from the coordinates.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/shape_index.hpp"

namespace {

using driftscope::detail::permuted_index;
using driftscope::detail::unravel;

TEST(ShapeIndex, UnravelInvertsTheRowMajorIndex) {
  const std::vector<uint64_t> shape = {3, 1, 4, 5};
  for (uint64_t flat = 0; flat < 60; ++flat) {
    const auto c = unravel(flat, shape);
    ASSERT_EQ(c.size(), shape.size());
    uint64_t back = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      EXPECT_LT(c[i], shape[i]);
      back = back * shape[i] + c[i];
    }
    EXPECT_EQ(back, flat);
  }
  EXPECT_TRUE(unravel(0, std::vector<uint64_t>{}).empty());  // a scalar
  // An axis of 0 (no element exists): the digits right of it, 0 from it leftwards, also in a
  // caller's buffer that held something else (PairResult::coords_of gives the same).
  uint64_t out[3] = {7, 7, 7};
  unravel(5, std::vector<uint64_t>{2, 0, 3}, out);
  EXPECT_EQ(std::vector<uint64_t>(out, out + 3), (std::vector<uint64_t>{0, 0, 2}));
  EXPECT_EQ(unravel(5, std::vector<uint64_t>{2, 0, 3}), (std::vector<uint64_t>{0, 0, 2}));
}

TEST(ShapeIndex, PermutedIndex) {
  // [2,3] transposed to [3,2]: reference element (i,j) is candidate element (j,i).
  EXPECT_EQ(permuted_index({2, 3}, {3, 2}, {1, 0}), (std::vector<uint64_t>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(permuted_index({}, {}, {}), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(permuted_index({0, 3}, {3, 0}, {1, 0}).empty());
  // A 4-D permutation against its definition by coordinates.
  const std::vector<uint64_t> ref = {2, 3, 4, 5};
  const std::vector<uint32_t> perm = {2, 0, 3, 1};  // reference axis i is candidate axis perm[i]
  std::vector<uint64_t> cand(4);
  for (size_t i = 0; i < 4; ++i) cand[perm[i]] = ref[i];
  const auto idx = permuted_index(ref, cand, perm);
  ASSERT_EQ(idx.size(), 120u);
  for (uint64_t flat = 0; flat < 120; ++flat) {
    const auto rc = unravel(flat, ref);
    std::vector<uint64_t> cc(4);
    for (size_t i = 0; i < 4; ++i) cc[perm[i]] = rc[i];
    uint64_t expect = 0;
    for (size_t k = 0; k < 4; ++k) expect = expect * cand[k] + cc[k];
    EXPECT_EQ(idx[flat], expect) << flat;
  }
}

}  // namespace
