// detail::crc32 (libdeflate or ISA-L, whichever the build found) against zlib's reference crc32:
// every length around the folding widths, unaligned starts, continuation and crc32_combine.
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32.hpp"

namespace driftscope::detail {
namespace {

uint32_t zlib_crc(uint32_t crc, const unsigned char* p, size_t n) {
  return static_cast<uint32_t>(::crc32(crc, p, static_cast<uInt>(n)));
}

TEST(Crc32, MatchesZlibForEveryLengthAndAlignment) {
  std::vector<unsigned char> buf(70000);
  std::mt19937 rng(3);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (size_t n : {511, 512, 513, 1023, 1024, 4095, 4096, 16384, 16391, 65536, 69000}) lengths.push_back(n);
  for (size_t n : lengths) {
    for (size_t off : {0, 1, 3, 8, 63}) {
      const unsigned char* p = buf.data() + off;
      ASSERT_EQ(crc32(0, p, n), zlib_crc(0, p, n)) << "n=" << n << " off=" << off;
      ASSERT_EQ(crc32(0xDEADBEEF, p, n), zlib_crc(0xDEADBEEF, p, n)) << "n=" << n << " off=" << off;
    }
  }
}

TEST(Crc32, PiecesContinueAndCombine) {
  std::vector<unsigned char> buf(100003);
  std::mt19937 rng(4);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  const uint32_t whole = zlib_crc(0, buf.data(), buf.size());
  for (size_t cut : {0, 1, 4096, 50000, 100002, 100003}) {
    const uint32_t a = crc32(0, buf.data(), cut);
    const uint32_t b = crc32(0, buf.data() + cut, buf.size() - cut);
    EXPECT_EQ(crc32(a, buf.data() + cut, buf.size() - cut), whole) << cut;
    EXPECT_EQ(crc32_combine(a, b, buf.size() - cut), whole) << cut;
  }
}

}  // namespace
}  // namespace driftscope::detail
