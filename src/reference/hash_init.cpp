// The hash initialiser (docs/references.md "The hash initialiser"). Every step is integer
// arithmetic modulo 2^64 or an exact float64 operation, except the one multiplication by the
// scale, which IEEE 754 rounds correctly everywhere: that is what makes C++, numpy and Java agree.
#include "driftscope/reference.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace driftscope::reference {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment
constexpr double kTwoM52 = 0x1p-52;
constexpr double kTwoM51 = 0x1p-51;

uint64_t output(uint64_t key, uint64_t counter) noexcept { return mix64(key + (counter + 1) * kGolden); }

template <class T>
Result<void> fill(std::string_view name, Distribution dist, double std_dev, std::span<T> out,
                  uint64_t seed, uint64_t first) {
  auto a = scale_for_std(std_dev);
  if (!a) return std::move(a).error();
  if (dist != Distribution::uniform && dist != Distribution::normal)
    return make_error(Errc::invalid_argument,
                      fmt::format("distribution {} is not uniform (0) or normal (1)",
                                  static_cast<int>(dist)));
  const uint64_t key = name_key(name, seed);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<T>(hash_value(key, first + i, dist, *a));
  return {};
}

}  // namespace

uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Spec step 1: the seed, every byte and the byte count each pass through mix64, so names that
// share a prefix, or differ only by trailing zero bytes, get unrelated keys.
uint64_t name_key(std::string_view name, uint64_t seed) noexcept {
  uint64_t k = mix64(seed + kGolden);
  for (unsigned char b : name) k = mix64((k ^ b) + kGolden);
  return mix64(k ^ static_cast<uint64_t>(name.size()));
}

double hash_value(uint64_t key, uint64_t index, Distribution dist, double scale_a) noexcept {
  if (dist == Distribution::normal) {
    // Four 51-bit draws sum below 2^53 (exact); centring on 2^52 and scaling by 2^-51 is exact.
    uint64_t s = 0;
    for (uint64_t j = 0; j < 4; ++j) s += output(key, 4 * index + j) >> 13;
    double centred = static_cast<double>(static_cast<int64_t>(s) - (int64_t{1} << 52)) * kTwoM51;
    return centred * scale_a;
  }
  // 53 high bits as k * 2^-52 in [0, 2), minus 1: exact, in [-1, 1).
  double u = static_cast<double>(output(key, index) >> 11) * kTwoM52 - 1.0;
  return u * scale_a;
}

Result<double> scale_for_std(double std_dev) {
  if (!std::isfinite(std_dev) || std_dev < 0)
    return make_error(Errc::invalid_argument,
                      fmt::format("std {} must be finite and >= 0", std_dev));
  return std_dev * std::sqrt(3.0);
}

Result<void> hash_fill(std::string_view name, Distribution dist, double std_dev, std::span<double> out,
                       uint64_t seed, uint64_t first) {
  return fill(name, dist, std_dev, out, seed, first);
}

Result<void> hash_fill(std::string_view name, Distribution dist, double std_dev, std::span<float> out,
                       uint64_t seed, uint64_t first) {
  return fill(name, dist, std_dev, out, seed, first);
}

Result<void> hash_fill_integers(std::string_view name, int64_t low, int64_t high,
                                std::span<int64_t> out, uint64_t seed, uint64_t first) {
  if (!(low < high) || (low < 0 && high > std::numeric_limits<int64_t>::max() + low))
    return make_error(Errc::invalid_argument,
                      fmt::format("integer range [{}, {}) must be non-empty and its width fit int64",
                                  low, high));
  const uint64_t width = static_cast<uint64_t>(high - low);
  const uint64_t key = name_key(name, seed);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = low + static_cast<int64_t>(output(key, first + i) % width);
  return {};
}

}  // namespace driftscope::reference
