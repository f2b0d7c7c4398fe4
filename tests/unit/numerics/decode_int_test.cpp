// Integer, bool and affine-quantised decoding, and the argument checks of decode().
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "decode_test_util.hpp"
#include "driftscope/decode.hpp"

namespace driftscope {
namespace {

using test::bytes_of;
using test::make_info;

template <class T>
void check_int_extremes(DType dt) {
  using L = std::numeric_limits<T>;
  const std::vector<T> v = {L::min(), L::max(), T(0), T(1), static_cast<T>(L::max() - 1),
                            static_cast<T>(L::min() + 1), static_cast<T>(L::max() / 3)};
  std::vector<double> out(v.size());
  std::vector<float> outf(v.size());
  const auto info = make_info(dt, {v.size()});
  ASSERT_TRUE(decode(info, bytes_of(v), 0, std::span<double>(out)).ok());
  ASSERT_TRUE(decode(info, bytes_of(v), 0, std::span<float>(outf)).ok());
  for (size_t i = 0; i < v.size(); ++i) {
    // One rounding from the integer (exact up to 2^53 / 2^24), as the C++ conversion does.
    EXPECT_EQ(out[i], static_cast<double>(v[i])) << i;
    EXPECT_EQ(outf[i], static_cast<float>(v[i])) << i;
  }
}

TEST(DecodeInt, EveryIntegerTypeIncludingExtremes) {
  check_int_extremes<int8_t>(DType::i8);
  check_int_extremes<uint8_t>(DType::u8);
  check_int_extremes<int16_t>(DType::i16);
  check_int_extremes<uint16_t>(DType::u16);
  check_int_extremes<int32_t>(DType::i32);
  check_int_extremes<uint32_t>(DType::u32);
  check_int_extremes<int64_t>(DType::i64);
  check_int_extremes<uint64_t>(DType::u64);
}

TEST(DecodeInt, ExactValuesOfExtremes) {
  const std::vector<int64_t> v = {std::numeric_limits<int64_t>::min(), (int64_t{1} << 53) + 1};
  std::vector<double> out(2);
  ASSERT_TRUE(decode(make_info(DType::i64, {2}), bytes_of(v), 0, std::span<double>(out)).ok());
  EXPECT_EQ(out[0], -0x1p63);
  EXPECT_EQ(out[1], 0x1p53);  // 2^53 + 1 rounds to even
  const std::vector<uint64_t> u = {~uint64_t{0}};
  ASSERT_TRUE(decode(make_info(DType::u64, {}), bytes_of(u), 0, std::span<double>(out).first(1)).ok());
  EXPECT_EQ(out[0], 0x1p64);
  const std::vector<int8_t> i8 = {-128, 127};
  ASSERT_TRUE(decode(make_info(DType::i8, {2}), bytes_of(i8), 0, std::span<double>(out)).ok());
  EXPECT_EQ(out[0], -128.0);
  EXPECT_EQ(out[1], 127.0);
}

TEST(DecodeBool, ZeroOneAndBadBytes) {
  const std::vector<uint8_t> ok = {0, 1, 1, 0};
  std::vector<double> out(4);
  ASSERT_TRUE(decode(make_info(DType::boolean, {4}), bytes_of(ok), 0, std::span<double>(out)).ok());
  EXPECT_EQ(out, (std::vector<double>{0, 1, 1, 0}));
  const std::vector<uint8_t> bad = {0, 1, 2, 0};
  auto r = decode(make_info(DType::boolean, {4}), bytes_of(bad), 0, std::span<double>(out));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::bad_value);
  EXPECT_NE(r.error().message.find("element 2"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("0x02"), std::string::npos) << r.error().message;
  // A range that avoids the bad byte decodes.
  EXPECT_TRUE(decode(make_info(DType::boolean, {4}), bytes_of(bad), 3, std::span<double>(out).first(1)).ok());
  const std::vector<uint8_t> ff = {0xff};
  std::vector<float> outf(1);
  EXPECT_EQ(decode(make_info(DType::boolean, {1}), bytes_of(ff), 0, std::span<float>(outf)).error().code,
            Errc::bad_value);
}

TEST(DecodeAffine, PerTensor) {
  auto info = make_info(DType::u8, {5});
  info.encoding.kind = EncodingKind::affine_tensor;
  info.encoding.scales = {0.5};
  info.encoding.zero_points = {128};
  const std::vector<uint8_t> q = {0, 128, 255, 129, 127};
  std::vector<double> out(5);
  ASSERT_TRUE(decode(info, bytes_of(q), 0, std::span<double>(out)).ok());
  EXPECT_EQ(out, (std::vector<double>{-64.0, 0.0, 63.5, 0.5, -0.5}));
  std::vector<float> outf(3);
  ASSERT_TRUE(decode(info, bytes_of(q), 2, std::span<float>(outf)).ok());
  EXPECT_EQ(outf, (std::vector<float>{63.5f, 0.5f, -0.5f}));
}

TEST(DecodeAffine, SixtyFourBitDifferenceIsExact) {
  // q - zp = INT64_MAX - (-2) needs 65 bits; computed in 128 bits, rounded once.
  auto info = make_info(DType::i64, {2});
  info.encoding.kind = EncodingKind::affine_tensor;
  info.encoding.scales = {1.0};
  info.encoding.zero_points = {-2};
  const std::vector<int64_t> q = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  std::vector<double> out(2);
  ASSERT_TRUE(decode(info, bytes_of(q), 0, std::span<double>(out)).ok());
  EXPECT_EQ(out[0], 0x1p63);
  EXPECT_EQ(out[1], -0x1p63);  // -2^63 + 2 rounds to -2^63
  // u64 with a negative zero point, and a small type with a zero point beyond 2^52.
  auto uinfo = make_info(DType::u64, {1});
  uinfo.encoding = info.encoding;
  uinfo.encoding.scales = {0.25};
  uinfo.encoding.zero_points = {std::numeric_limits<int64_t>::min()};
  const std::vector<uint64_t> uq = {~uint64_t{0}};
  ASSERT_TRUE(decode(uinfo, bytes_of(uq), 0, std::span<double>(out).first(1)).ok());
  EXPECT_EQ(out[0], 0.25 * (0x1p64 + 0x1p63));
  auto binfo = make_info(DType::i8, {1});
  binfo.encoding = info.encoding;
  binfo.encoding.zero_points = {(int64_t{1} << 60) + 3};
  const std::vector<int8_t> bq = {3};
  ASSERT_TRUE(decode(binfo, bytes_of(bq), 0, std::span<double>(out).first(1)).ok());
  EXPECT_EQ(out[0], -0x1p60);
}

TEST(DecodeAffine, PerChannelOnAMiddleAxis) {
  // shape [2, 3, 4], channels along axis 1: element (a, c, d) uses scale[c], zero_point[c].
  auto info = make_info(DType::i8, {2, 3, 4});
  info.encoding.kind = EncodingKind::affine_channel;
  info.encoding.axis = 1;
  info.encoding.scales = {1.0, 0.5, -2.0};
  info.encoding.zero_points = {0, 10, -3};
  std::vector<int8_t> q(24);
  for (int i = 0; i < 24; ++i) q[i] = static_cast<int8_t>(i * 5 - 60);
  const auto payload = bytes_of(q);
  std::vector<double> full(24);
  ASSERT_TRUE(decode(info, payload, 0, std::span<double>(full)).ok());
  for (int i = 0; i < 24; ++i) {
    const int c = (i / 4) % 3;
    EXPECT_EQ(full[i], info.encoding.scales[c] *
                           static_cast<double>(q[i] - info.encoding.zero_points[c])) << i;
  }
  // Every sub-range agrees with the full decode (the channel depends on the absolute index).
  for (uint64_t first = 0; first < 24; ++first)
    for (size_t n = 0; first + n <= 24; ++n) {
      std::vector<double> part(n);
      ASSERT_TRUE(decode(info, payload, first, std::span<double>(part)).ok());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(part[i], full[first + i]) << first << "+" << i;
    }
  // Axis 0 and the last axis as well.
  info.encoding.axis = 2;
  info.encoding.scales = {1, 2, 3, 4};
  info.encoding.zero_points = {0, 0, 0, 1};
  ASSERT_TRUE(decode(info, payload, 0, std::span<double>(full)).ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(full[i], (i % 4 + 1) * (q[i] - (i % 4 == 3))) << i;
  info.encoding.axis = 0;
  info.encoding.scales = {1, -1};
  info.encoding.zero_points = {0, 0};
  ASSERT_TRUE(decode(info, payload, 0, std::span<double>(full)).ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(full[i], (i < 12 ? 1 : -1) * q[i]) << i;
}

TEST(DecodeErrors, RangeAndSizeAreChecked) {
  const std::vector<float> v(6, 1.0f);
  const auto payload = bytes_of(v);
  std::vector<double> out(7);
  auto r = decode(make_info(DType::f32, {2, 3}), payload, 0, std::span<double>(out));
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  r = decode(make_info(DType::f32, {2, 3}), payload, 6, std::span<double>(out).first(1));
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  r = decode(make_info(DType::f32, {2, 3}), payload, ~uint64_t{0}, std::span<double>(out).first(2));
  EXPECT_EQ(r.error().code, Errc::invalid_argument);  // first + n wraps around
  EXPECT_TRUE(decode(make_info(DType::f32, {2, 3}), payload, 6, std::span<double>()).ok());
  r = decode(make_info(DType::f32, {2, 4}), payload, 0, std::span<double>(out).first(1));
  EXPECT_EQ(r.error().code, Errc::invalid_argument);  // payload too short for the shape
  EXPECT_NE(r.error().message.find("24 bytes"), std::string::npos) << r.error().message;
  r = decode(make_info(DType::f32, {1ull << 40, 1ull << 40}), payload, 0, std::span<double>(out));
  EXPECT_EQ(r.error().code, Errc::shape_overflow);
  r = decode(make_info(DType::f64, {1ull << 62}), payload, 0, std::span<double>(out));
  EXPECT_EQ(r.error().code, Errc::shape_overflow);  // bytes overflow
  r = decode(make_info(static_cast<DType>(16), {6}), payload, 0, std::span<double>(out));
  EXPECT_EQ(r.error().code, Errc::bad_dtype);
  // Rank 0 is one element; a zero dim is none.
  EXPECT_TRUE(decode(make_info(DType::f32, {}), std::span(payload).first(4), 0,
                     std::span<double>(out).first(1)).ok());
  EXPECT_TRUE(decode(make_info(DType::f32, {3, 0}), std::span<const std::byte>(), 0,
                     std::span<double>()).ok());
}

TEST(DecodeErrors, EncodingParametersAreChecked) {
  const std::vector<int8_t> q(6, 1);
  const auto payload = bytes_of(q);
  std::vector<double> out(6);
  auto info = make_info(DType::i8, {2, 3});
  info.encoding.kind = EncodingKind::affine_channel;
  info.encoding.axis = 2;  // not below rank
  info.encoding.scales = {1, 1, 1};
  info.encoding.zero_points = {0, 0, 0};
  EXPECT_EQ(decode(info, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
  info.encoding.axis = 0;  // dims[0] = 2 but three scales
  EXPECT_EQ(decode(info, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
  info.encoding.axis = 1;
  EXPECT_TRUE(decode(info, payload, 0, std::span<double>(out)).ok());
  info.encoding.zero_points = {0, 0};
  EXPECT_EQ(decode(info, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
  info.encoding.zero_points = {0, 0, 0};
  info.encoding.scales[1] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(decode(info, payload, 0, std::span<double>(out)).error().code, Errc::bad_value);
  info.encoding.scales[1] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(decode(info, payload, 0, std::span<double>(out)).error().code, Errc::bad_value);
  auto finfo = make_info(DType::f16, {3});
  finfo.encoding.kind = EncodingKind::affine_tensor;
  finfo.encoding.scales = {1};
  finfo.encoding.zero_points = {0};
  EXPECT_EQ(decode(finfo, std::span(payload).first(6), 0, std::span<double>(out).first(3)).error().code,
            Errc::bad_encoding);  // affine needs an integer dtype
  auto binfo = make_info(DType::boolean, {6});
  binfo.encoding = finfo.encoding;
  EXPECT_EQ(decode(binfo, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
  auto raw = make_info(DType::i8, {6});
  raw.encoding.scales = {1};
  EXPECT_EQ(decode(raw, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
  auto odd = make_info(DType::i8, {6});
  odd.encoding.kind = static_cast<EncodingKind>(7);
  EXPECT_EQ(decode(odd, payload, 0, std::span<double>(out)).error().code, Errc::bad_encoding);
}

// Random, mostly inconsistent descriptions and payloads: every call returns a value or one of the
// documented error codes, and never reads outside the payload (run under ASan in CI).
TEST(DecodeErrors, RandomDescriptionsNeverCrash) {
  std::mt19937_64 rng(42);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const std::set<Errc> allowed = {Errc::invalid_argument, Errc::bad_dtype, Errc::shape_overflow,
                                  Errc::bad_encoding, Errc::bad_value};
  int ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    TensorInfo info;
    info.name = "r";
    info.dtype = static_cast<DType>(pick(18));
    const size_t rank = pick(5);
    for (size_t k = 0; k < rank; ++k)
      info.shape.push_back(pick(10) == 0 ? (pick(2) ? 0 : uint64_t{1} << (30 + pick(34))) : 1 + pick(5));
    info.encoding.kind = static_cast<EncodingKind>(pick(4));
    info.encoding.axis = static_cast<uint32_t>(pick(5));
    const size_t channels = pick(7);
    for (size_t k = 0; k < channels; ++k) {
      info.encoding.scales.push_back(pick(20) == 0 ? std::numeric_limits<double>::infinity() : 0.5);
      info.encoding.zero_points.push_back(static_cast<int64_t>(pick(7)) - 3);
    }
    if (pick(3) == 0) info.encoding.zero_points.resize(pick(4));
    if (pick(2) == 0) info.encoding = Encoding{};  // raw half of the time
    const uint64_t numel = info.numel();
    const size_t size = dtype_size(info.dtype);
    uint64_t bytes = numel < 4096 && size ? numel * size : pick(64);
    if (pick(4) == 0) bytes = bytes + pick(3) - 1;  // off by one either way (wraps to big: capped)
    if (bytes > 1 << 16) bytes = pick(64);
    std::vector<std::byte> payload(bytes);
    for (auto& b : payload) b = static_cast<std::byte>(pick(pick(2) ? 2 : 256));
    std::vector<double> out(pick(40));
    const uint64_t first = pick(8) == 0 ? ~uint64_t{0} - pick(3) : pick(8);
    auto r = decode(info, payload, first, std::span<double>(out));
    if (r.ok()) {
      ++ok;
    } else {
      EXPECT_TRUE(allowed.count(r.error().code)) << r.error().to_string();
      EXPECT_FALSE(r.error().message.empty());
      EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
    }
    auto s = summarize(info, payload, static_cast<uint32_t>(pick(40)), rng());
    if (!s.ok()) EXPECT_TRUE(allowed.count(s.error().code)) << s.error().to_string();
  }
  EXPECT_GT(ok, 50);  // the generator also produces valid cases
}

}  // namespace
}  // namespace driftscope
