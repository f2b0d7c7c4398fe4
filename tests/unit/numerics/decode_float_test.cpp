// Widening of every f16 / bf16 / fp8 bit pattern against two independent oracles (PyTorch's
// dtypes, via data/float_oracle.txt, and a bit-level formula written here), on every SIMD target;
// and round-to-nearest-even narrowing (double_to_f16 against NumPy, double_to_bf16 against an
// ldexp/nearbyint formula), ties, overflow, subnormals and NaN.
#include <cfenv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "decode_test_util.hpp"
#include "driftscope/decode.hpp"

namespace driftscope {
namespace {

using test::bits_of;
using test::bytes_of;
using test::for_each_target;
using test::make_info;

constexpr uint64_t kCanonNan = 0x7ff8000000000000ull;

uint64_t canon_bits(double v) { return std::isnan(v) ? kCanonNan : bits_of(v); }

struct Oracle {
  std::map<std::string, std::vector<uint64_t>> fp8;            // name -> 256 f64 bit patterns
  std::map<std::string, std::vector<uint64_t>> block_digests;  // "f16"/"bf16" -> 256 digests
  std::vector<std::pair<uint64_t, uint16_t>> to_f16;          // f64 bits -> numpy f16 bits
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle r;
    std::ifstream in(std::string(DS_SOURCE_DIR) + "/tests/unit/numerics/data/float_oracle.txt");
    EXPECT_TRUE(in.good()) << "missing tests/unit/numerics/data/float_oracle.txt";
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string kind, a, b;
      ls >> kind >> a >> b;
      const uint64_t x = std::stoull(a, nullptr, 16);
      const uint64_t y = std::stoull(b, nullptr, 16);
      if (kind == "f8e4m3fn" || kind == "f8e5m2") {
        r.fp8[kind].push_back(y);
      } else if (kind == "f16_block" || kind == "bf16_block") {
        r.block_digests[kind.substr(0, kind.find('_'))].push_back(y);
      } else if (kind == "to_f16") {
        r.to_f16.emplace_back(x, static_cast<uint16_t>(y));
      }
    }
    return r;
  }();
  return o;
}

uint64_t fnv1a64_words(const double* v, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    uint64_t w = canon_bits(v[i]);
    for (int k = 0; k < 8; ++k) {
      h ^= (w >> (8 * k)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

// Independent bit-level reference: value = (-1)^s * M * 2^(E - bias - mbits), with M the
// significand including the implicit bit, built by repeated halving/doubling in long double.
struct Format {
  int ebits, mbits, bias;
  bool has_inf;  // IEEE-like: all-ones exponent is Inf/NaN. Otherwise only all-ones is NaN.
};
double reference_value(uint32_t bits, Format f) {
  const uint32_t emax = (1u << f.ebits) - 1;
  const bool neg = (bits >> (f.ebits + f.mbits)) & 1;
  const uint32_t e = (bits >> f.mbits) & emax;
  const uint32_t m = bits & ((1u << f.mbits) - 1);
  if (f.has_inf && e == emax)
    return m ? std::numeric_limits<double>::quiet_NaN()
             : (neg ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
  if (!f.has_inf && e == emax && m == (1u << f.mbits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  long double sig = e == 0 ? m : (m + (1u << f.mbits));
  int power = (e == 0 ? 1 : static_cast<int>(e)) - f.bias - f.mbits;
  for (; power > 0; --power) sig *= 2;
  for (; power < 0; ++power) sig /= 2;
  return static_cast<double>(neg ? -sig : sig);
}
constexpr Format kF16{5, 10, 15, true};
constexpr Format kBF16{8, 7, 127, true};
constexpr Format kE4M3{4, 3, 7, false};
constexpr Format kE5M2{5, 2, 15, true};

std::vector<uint16_t> all_u16() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

void expect_same(double got, double want, uint32_t code) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << code;
  } else {
    EXPECT_EQ(bits_of(got), bits_of(want)) << "code 0x" << std::hex << code << ": got " << got
                                          << " want " << want;
  }
}

TEST(DecodeFloat, Fp8AllPatternsMatchTorchAndFormula) {
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  const auto payload = bytes_of(codes);
  for (auto [dt, name, fmt] : {std::tuple{DType::f8e4m3fn, "f8e4m3fn", kE4M3},
                               std::tuple{DType::f8e5m2, "f8e5m2", kE5M2}}) {
    SCOPED_TRACE(name);
    const auto& want = oracle().fp8.at(name);
    ASSERT_EQ(want.size(), 256u);
    std::vector<double> out(256);
    std::vector<float> outf(256);
    ASSERT_TRUE(decode(make_info(dt, {256}), payload, 0, std::span<double>(out)).ok());
    ASSERT_TRUE(decode(make_info(dt, {256}), payload, 0, std::span<float>(outf)).ok());
    for (uint32_t c = 0; c < 256; ++c) {
      EXPECT_EQ(canon_bits(out[c]), want[c]) << "code 0x" << std::hex << c;
      expect_same(out[c], reference_value(c, fmt), c);
      expect_same(static_cast<double>(outf[c]), out[c], c);
      const double scalar = dt == DType::f8e4m3fn ? f8e4m3fn_to_double(static_cast<uint8_t>(c))
                                                  : f8e5m2_to_double(static_cast<uint8_t>(c));
      expect_same(scalar, out[c], c);
    }
  }
}

TEST(DecodeFloat, Fp8SpecialValues) {
  EXPECT_EQ(f8e4m3fn_to_double(0x7e), 448.0);   // largest finite
  EXPECT_EQ(f8e4m3fn_to_double(0x78), 256.0);   // S.1111.000 is a number, not Inf
  EXPECT_TRUE(std::isnan(f8e4m3fn_to_double(0x7f)));
  EXPECT_TRUE(std::isnan(f8e4m3fn_to_double(0xff)));
  EXPECT_EQ(f8e4m3fn_to_double(0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_TRUE(std::signbit(f8e4m3fn_to_double(0x80)));
  EXPECT_EQ(f8e5m2_to_double(0x7b), 57344.0);
  EXPECT_EQ(f8e5m2_to_double(0x7c), std::numeric_limits<double>::infinity());
  EXPECT_EQ(f8e5m2_to_double(0xfc), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(f8e5m2_to_double(0x7d)));
  EXPECT_EQ(f8e5m2_to_double(0x01), std::ldexp(1.0, -16));
}

void check_16bit_exhaustive(DType dt, const char* name, Format fmt, double (*scalar)(uint16_t)) {
  const auto codes = all_u16();
  const auto payload = bytes_of(codes);
  const auto info = make_info(dt, {65536});
  const auto& digests = oracle().block_digests.at(name);
  ASSERT_EQ(digests.size(), 256u);
  for_each_target([&] {
    std::vector<double> out(65536);
    std::vector<float> outf(65536);
    ASSERT_TRUE(decode(info, payload, 0, std::span<double>(out)).ok());
    ASSERT_TRUE(decode(info, payload, 0, std::span<float>(outf)).ok());
    for (uint32_t block = 0; block < 256; ++block)
      EXPECT_EQ(fnv1a64_words(out.data() + block * 256, 256), digests[block])
          << name << " block 0x" << std::hex << block << " differs from torch";
    int failures = 0;
    for (uint32_t c = 0; c < 65536 && failures < 10; ++c) {
      const double want = reference_value(c, fmt);
      const bool bad = std::isnan(want) ? !std::isnan(out[c]) || !std::isnan(outf[c]) ||
                                              !std::isnan(scalar(static_cast<uint16_t>(c)))
                                        : bits_of(out[c]) != bits_of(want) ||
                                              bits_of(static_cast<double>(outf[c])) != bits_of(want) ||
                                              bits_of(scalar(static_cast<uint16_t>(c))) != bits_of(want);
      if (bad) {
        ++failures;
        ADD_FAILURE() << name << " code 0x" << std::hex << c << ": simd " << out[c] << ", float "
                      << outf[c] << ", scalar " << scalar(static_cast<uint16_t>(c)) << ", want "
                      << want;
      }
    }
    // Any sub-range decodes to the same values: exercises unaligned starts and vector tails.
    for (uint64_t first : {0u, 1u, 3u, 7u, 31744u, 65500u}) {
      for (size_t n : {0u, 1u, 2u, 3u, 5u, 8u, 15u, 16u, 17u, 33u}) {
        if (first + n > 65536) continue;
        std::vector<double> part(n);
        std::vector<float> partf(n);
        ASSERT_TRUE(decode(info, payload, first, std::span<double>(part)).ok());
        ASSERT_TRUE(decode(info, payload, first, std::span<float>(partf)).ok());
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(canon_bits(part[i]), canon_bits(out[first + i])) << first << "+" << i;
          EXPECT_EQ(canon_bits(partf[i]), canon_bits(outf[first + i])) << first << "+" << i;
        }
      }
    }
  });
}

TEST(DecodeFloat, F16AllPatternsMatchTorchAndFormulaOnEveryTarget) {
  check_16bit_exhaustive(DType::f16, "f16", kF16, &f16_to_double);
}

TEST(DecodeFloat, BF16AllPatternsMatchTorchAndFormulaOnEveryTarget) {
  check_16bit_exhaustive(DType::bf16, "bf16", kBF16, &bf16_to_double);
}

TEST(DecodeFloat, F16SpecialValues) {
  EXPECT_EQ(f16_to_double(0x7bff), 65504.0);
  EXPECT_EQ(f16_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16_to_double(0x03ff), std::ldexp(1023.0, -24));  // largest subnormal
  EXPECT_EQ(f16_to_double(0x0400), std::ldexp(1.0, -14));     // smallest normal
  EXPECT_EQ(f16_to_double(0x7c00), std::numeric_limits<double>::infinity());
  EXPECT_EQ(f16_to_double(0xfc00), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_double(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_to_double(0xfe00)));
  EXPECT_TRUE(std::signbit(f16_to_double(0x8000)));
  EXPECT_EQ(f16_to_double(0x8000), 0.0);
  EXPECT_EQ(bf16_to_double(0x3f80), 1.0);
  EXPECT_EQ(bf16_to_double(0x0001), std::ldexp(1.0, -133));  // bf16 subnormal
  EXPECT_EQ(bf16_to_double(0x7f7f), std::ldexp(255.0, 120));  // largest finite
}

TEST(DecodeFloat, F32AndF64PassThroughBitExactOnEveryTarget) {
  std::vector<float> f = {0.0f, -0.0f, 1.5f, -3.25e-42f /* subnormal */,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e-45f, 123456.789f, -7.0f};
  for (int i = 0; i < 40; ++i) f.push_back(static_cast<float>(i) * 0.37f - 5.0f);
  const auto payload = bytes_of(f);
  for_each_target([&] {
    std::vector<double> out(f.size());
    ASSERT_TRUE(decode(make_info(DType::f32, {f.size()}), payload, 0, std::span<double>(out)).ok());
    for (size_t i = 0; i < f.size(); ++i) expect_same(out[i], static_cast<double>(f[i]), 0);
    for (size_t first = 0; first < 9; ++first) {
      std::vector<double> part(f.size() - first);
      ASSERT_TRUE(decode(make_info(DType::f32, {f.size()}), payload, first,
                         std::span<double>(part)).ok());
      for (size_t i = 0; i < part.size(); ++i) expect_same(part[i], out[first + i], 0);
    }
  });
  std::vector<double> d = {0.0, -0.0, 1e-310, -1e308, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), 3.141592653589793, 1e300};
  std::vector<double> out(d.size());
  std::vector<float> outf(d.size());
  ASSERT_TRUE(decode(make_info(DType::f64, {2, 4}), bytes_of(d), 0, std::span<double>(out)).ok());
  ASSERT_TRUE(decode(make_info(DType::f64, {2, 4}), bytes_of(d), 0, std::span<float>(outf)).ok());
  for (size_t i = 0; i < d.size(); ++i) {
    expect_same(out[i], d[i], 0);
    expect_same(static_cast<double>(outf[i]), static_cast<double>(static_cast<float>(d[i])), 0);
  }
  EXPECT_EQ(outf[3], -std::numeric_limits<float>::infinity());  // f64 beyond float range
}

// ---- narrowing -----------------------------------------------------------------------------

TEST(NarrowF16, MatchesNumpyOnTiesNudgesAndRandomValues) {
  const auto& cases = oracle().to_f16;
  ASSERT_GT(cases.size(), 1000u);
  for (auto [vbits, want] : cases) {
    double v;
    std::memcpy(&v, &vbits, 8);
    EXPECT_EQ(double_to_f16(v), want) << std::hexfloat << v;
  }
}

TEST(NarrowF16, EveryValueRoundTripsAndEveryTieGoesToEven) {
  for (uint32_t c = 0; c < 0x7c00; ++c) {
    const auto h = static_cast<uint16_t>(c);
    ASSERT_EQ(double_to_f16(f16_to_double(h)), h);
    ASSERT_EQ(double_to_f16(f16_to_double(static_cast<uint16_t>(h | 0x8000))), h | 0x8000);
    if (c + 1 >= 0x7c00) continue;
    // midpoint between h and h+1 (exact in double); ties go to the even code
    const double lo = f16_to_double(h), hi = f16_to_double(static_cast<uint16_t>(c + 1));
    const double mid = (lo + hi) / 2;
    const uint16_t even = (c & 1) ? static_cast<uint16_t>(c + 1) : h;
    ASSERT_EQ(double_to_f16(mid), even) << std::hex << c;
    ASSERT_EQ(double_to_f16(-mid), even | 0x8000) << std::hex << c;
    ASSERT_EQ(double_to_f16(std::nextafter(mid, 0.0)), h) << std::hex << c;
    ASSERT_EQ(double_to_f16(std::nextafter(mid, 1e9)), c + 1) << std::hex << c;
  }
}

TEST(NarrowF16, OverflowUnderflowNanAndSignedZero) {
  EXPECT_EQ(double_to_f16(65504.0), 0x7bff);
  EXPECT_EQ(double_to_f16(65519.99), 0x7bff);
  EXPECT_EQ(double_to_f16(65520.0), 0x7c00);  // the tie above the largest finite goes to Inf
  EXPECT_EQ(double_to_f16(1e300), 0x7c00);
  EXPECT_EQ(double_to_f16(-1e300), 0xfc00);
  EXPECT_EQ(double_to_f16(std::numeric_limits<double>::infinity()), 0x7c00);
  EXPECT_EQ(double_to_f16(std::ldexp(1.0, -25)), 0x0000);  // tie between 0 and 2^-24: even (0)
  EXPECT_EQ(double_to_f16(std::ldexp(3.0, -25)), 0x0002);  // tie between 1 and 2 quanta: even
  EXPECT_EQ(double_to_f16(std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001);
  EXPECT_EQ(double_to_f16(std::ldexp(1.0, -14) - std::ldexp(1.0, -25)), 0x0400);  // to normal
  EXPECT_EQ(double_to_f16(5e-324), 0x0000);
  EXPECT_EQ(double_to_f16(-5e-324), 0x8000);
  EXPECT_EQ(double_to_f16(-0.0), 0x8000);
  EXPECT_EQ(double_to_f16(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3c01);  // one rounding
  const uint16_t nan = double_to_f16(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(double_to_f16(-std::numeric_limits<double>::quiet_NaN()) & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_double(double_to_f16(std::numeric_limits<double>::signaling_NaN()))));
}

// Independent RNE oracle: scale |v| so one quantum of the target is 1, let nearbyint (default
// rounding mode: to nearest, ties to even) round, scale back; saturate to Inf at 2^128.
double bf16_oracle(double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e;
  std::frexp(std::fabs(v), &e);  // |v| in [2^(e-1), 2^e)
  const int quantum = std::max(e - 1, -126) - 7;
  const double r = std::ldexp(std::nearbyint(std::ldexp(std::fabs(v), -quantum)), quantum);
  const double mag = r >= std::ldexp(1.0, 128) ? std::numeric_limits<double>::infinity() : r;
  return std::copysign(mag, v);
}

TEST(NarrowBF16, RandomValuesMatchIndependentOracle) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> exp_dist(-140, 130);
  std::normal_distribution<double> normal;
  for (int i = 0; i < 200000; ++i) {
    const double v = normal(rng) * std::ldexp(1.0, exp_dist(rng));
    const double want = bf16_oracle(v);
    const double got = bf16_to_double(double_to_bf16(v));
    ASSERT_EQ(bits_of(got), bits_of(want)) << std::hexfloat << v;
  }
  // Random bit patterns cover every binade, subnormal doubles included.
  for (int i = 0; i < 200000; ++i) {
    const uint64_t b = rng();
    double v;
    std::memcpy(&v, &b, 8);
    if (std::isnan(v)) continue;
    ASSERT_EQ(bits_of(bf16_to_double(double_to_bf16(v))), bits_of(bf16_oracle(v)))
        << std::hexfloat << v;
  }
}

TEST(NarrowBF16, EveryValueRoundTripsAndEveryTieGoesToEven) {
  for (uint32_t c = 0; c < 0x7f80; ++c) {
    const auto h = static_cast<uint16_t>(c);
    ASSERT_EQ(double_to_bf16(bf16_to_double(h)), h);
    ASSERT_EQ(double_to_bf16(bf16_to_double(static_cast<uint16_t>(h | 0x8000))), h | 0x8000);
    const double lo = bf16_to_double(h);
    const double hi = c + 1 == 0x7f80 ? std::ldexp(1.0, 128) : bf16_to_double(static_cast<uint16_t>(c + 1));
    const double mid = (lo + hi) / 2;
    const uint16_t even = (c & 1) ? static_cast<uint16_t>(c + 1) : h;
    ASSERT_EQ(double_to_bf16(mid), even) << std::hex << c;
    ASSERT_EQ(double_to_bf16(std::nextafter(mid, 0.0)), h) << std::hex << c;
    ASSERT_EQ(double_to_bf16(std::nextafter(mid, 1e300)), c + 1) << std::hex << c;
  }
}

TEST(NarrowBF16, SpecialCases) {
  // Just above the tie between 1 and 1+2^-7: rounding through float32 first would give 1.0.
  EXPECT_EQ(double_to_bf16(1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3f81);
  EXPECT_EQ(double_to_bf16(1 + std::ldexp(1.0, -8)), 0x3f80);
  EXPECT_EQ(double_to_bf16(3.4e38), 0x7f80);   // beyond the largest finite bf16 (3.39e38)
  EXPECT_EQ(double_to_bf16(-1e300), 0xff80);
  EXPECT_EQ(double_to_bf16(-0.0), 0x8000);
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -134)), 0x0000);  // tie between 0 and 2^-133
  EXPECT_EQ(double_to_bf16(std::ldexp(3.0, -134)), 0x0002);
  const uint16_t nan = double_to_bf16(-std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(nan & 0x8000, 0x8000);
}

}  // namespace
}  // namespace driftscope
