// The hash initialiser against the shared golden vectors (tests/vectors/hashinit/golden.json,
// also checked by Python and Java), through the C++ API and the C ABI.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driftscope.h"
#include "driftscope/reference.hpp"

using namespace driftscope;
using reference::Distribution;

namespace {

nlohmann::json golden() {
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/tests/vectors/hashinit/golden.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

uint64_t hex64(const std::string& s) { return std::stoull(s, nullptr, 16); }
Distribution dist(const nlohmann::json& c) {
  return c["distribution"] == "normal" ? Distribution::normal : Distribution::uniform;
}

// SHA-256 would need a dependency; the digest cases are checked in Python and Java, and here
// through the first/last elements of the same tensors agreeing with the C ABI in pieces.

TEST(HashInit, SplitMix64KnownAnswer) {
  // SplitMix64 seeded with 0 (the reference C of Vigna): the spec's stream with key 0.
  auto g = golden();
  for (uint64_t c = 0; c < 3; ++c)
    EXPECT_EQ(reference::mix64((c + 1) * 0x9E3779B97F4A7C15ull), hex64(g["splitmix64_seed0"][c]));
  EXPECT_EQ(reference::mix64(0x9E3779B97F4A7C15ull), 0xE220A8397B1DCDAFull);
}

TEST(HashInit, GoldenValuesCppAndCAbi) {
  auto g = golden();
  ASSERT_GE(g["values"].size(), 6u);
  for (const auto& c : g["values"]) {
    std::string name = c["name"];
    uint64_t seed = std::stoull(c["seed"].get<std::string>());
    double sd = std::bit_cast<double>(hex64(c["std_bits"]));
    EXPECT_EQ(reference::name_key(name, seed), hex64(c["key"])) << name;
    size_t n = c["float64_bits"].size();
    std::vector<double> v64(n);
    std::vector<float> v32(n), c32(n);
    std::vector<double> c64(n);
    ASSERT_TRUE(reference::hash_fill(name, dist(c), sd, std::span<double>(v64), seed));
    ASSERT_TRUE(reference::hash_fill(name, dist(c), sd, std::span<float>(v32), seed));
    int d = c["distribution"] == "normal" ? DS_HASH_NORMAL : DS_HASH_UNIFORM;
    ASSERT_EQ(ds_hash_fill_f64(name.data(), name.size(), d, sd, seed, 0, c64.data(), n), DS_OK);
    ASSERT_EQ(ds_hash_fill_f32(name.data(), name.size(), d, sd, seed, 0, c32.data(), n), DS_OK);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(std::bit_cast<uint64_t>(v64[i]), hex64(c["float64_bits"][i])) << name << " " << i;
      EXPECT_EQ(std::bit_cast<uint32_t>(v32[i]), hex64(c["float32_bits"][i])) << name << " " << i;
      EXPECT_EQ(std::bit_cast<uint64_t>(c64[i]), std::bit_cast<uint64_t>(v64[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(c32[i]), std::bit_cast<uint32_t>(v32[i]));
    }
  }
}

TEST(HashInit, GoldenIntegers) {
  auto g = golden();
  for (const auto& c : g["integers"]) {
    std::string name = c["name"];
    size_t n = c["values"].size();
    std::vector<int64_t> v(n), cv(n);
    uint64_t seed = std::stoull(c["seed"].get<std::string>());
    ASSERT_TRUE(reference::hash_fill_integers(name, c["low"], c["high"], std::span<int64_t>(v), seed));
    ASSERT_EQ(ds_hash_fill_i64(name.data(), name.size(), c["low"], c["high"], seed, 0, cv.data(), n), DS_OK);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(v[i], c["values"][i].get<int64_t>());
      EXPECT_EQ(cv[i], v[i]);
    }
  }
}

TEST(HashInit, SecondBuildAndPiecesAreBitIdentical) {
  std::vector<float> a(4097), b(4097), pieces(4097);
  ASSERT_TRUE(reference::hash_fill("layer.weight", Distribution::normal, 0.05, std::span<float>(a)));
  ASSERT_TRUE(reference::hash_fill("layer.weight", Distribution::normal, 0.05, std::span<float>(b)));
  ASSERT_TRUE(reference::hash_fill("layer.weight", Distribution::normal, 0.05,
                                   std::span<float>(pieces).first(1000)));
  ASSERT_TRUE(reference::hash_fill("layer.weight", Distribution::normal, 0.05,
                                   std::span<float>(pieces).subspan(1000), 0, 1000));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.data(), pieces.data(), a.size() * sizeof(float)), 0);
  // and a different name or seed gives a different tensor
  ASSERT_TRUE(reference::hash_fill("layer.weight", Distribution::normal, 0.05, std::span<float>(b), 1));
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(HashInit, MomentsMatchTheRequestedStd) {
  for (auto d : {Distribution::uniform, Distribution::normal}) {
    std::vector<double> v(200000);
    ASSERT_TRUE(reference::hash_fill("moments", d, 0.25, std::span<double>(v)));
    double s = 0, s2 = 0, mx = 0;
    for (double x : v) s += x, s2 += x * x, mx = std::max(mx, std::abs(x));
    double mean = s / v.size(), sd = std::sqrt(s2 / v.size() - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.005);
    EXPECT_NEAR(sd, 0.25, 0.0025);
    EXPECT_LE(mx, 0.25 * (d == Distribution::normal ? 2 : 1) * std::sqrt(3.0));
  }
}

TEST(HashInit, BadArgumentsAreErrorsNotCrashes) {
  std::vector<float> v(4);
  auto r = reference::hash_fill("w", Distribution::uniform, -1.0, std::span<float>(v));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_FALSE(reference::hash_fill("w", Distribution::uniform, NAN, std::span<float>(v)));
  EXPECT_FALSE(reference::hash_fill("w", static_cast<Distribution>(7), 1.0, std::span<float>(v)));
  std::vector<int64_t> iv(4);
  EXPECT_FALSE(reference::hash_fill_integers("w", 5, 5, std::span<int64_t>(iv)));
  EXPECT_FALSE(reference::hash_fill_integers("w", INT64_MIN, INT64_MAX, std::span<int64_t>(iv)));
  EXPECT_EQ(ds_hash_fill_f32(nullptr, 3, DS_HASH_UNIFORM, 1.0, 0, 0, v.data(), 4), DS_E_INVALID_ARGUMENT);
  EXPECT_EQ(ds_hash_fill_f32("w", 1, DS_HASH_UNIFORM, 1.0, 0, 0, nullptr, 4), DS_E_INVALID_ARGUMENT);
  EXPECT_EQ(ds_hash_fill_f32("w", 1, 9, 1.0, 0, 0, v.data(), 4), DS_E_INVALID_ARGUMENT);
  EXPECT_EQ(ds_hash_fill_i64("w", 1, 3, 1, 0, 0, iv.data(), 4), DS_E_INVALID_ARGUMENT);
  EXPECT_EQ(ds_hash_fill_f32(nullptr, 0, DS_HASH_UNIFORM, 1.0, 0, 0, nullptr, 0), DS_OK);
}

}  // namespace
