// report/json_double.hpp must print every double exactly as nlohmann::detail::to_chars does (the
// JSON report's bytes are nlohmann's dump): edge cases of Grisu2 and of the layout, then millions
// of doubles drawn from every exponent and from the values a report holds (metrics near 0 and 1).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/json_double.hpp"

namespace {

std::string nlohmann_double_text(double v) {
  char buf[64];
  return std::string(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
}

std::string json_double_text(double v) {
  char buf[64];
  std::memset(buf, 'x', sizeof buf);
  char* end = driftscope::compare_detail::json_double(buf, v);
  EXPECT_LE(end - buf, 24) << nlohmann_double_text(v);
  return std::string(buf, end);
}

TEST(JsonDouble, EdgeCases) {
  std::vector<double> vs = {0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 5e-324, -5e-324,
                            DBL_MIN, DBL_MAX, -DBL_MAX, DBL_EPSILON, DBL_MIN / 2, DBL_TRUE_MIN * 3,
                            1e15, 1e16, 1e-4, 1e-5, 9.999999999999999e14, 1e15 - 1, 1e15 + 1,
                            123456789012345678.0, 0.0001, 0.00001, 1e21, 1e22, 1e23, 9007199254740993.0,
                            4.9406564584124654e-324, 2.2250738585072009e-308, 1.7976931348623157e308,
                            0.999999, 0.9999999999999999, 1.0000000000000002, 60.14, 80.0, 0.000984};
  for (int e = -1074; e <= 1023; ++e) {
    vs.push_back(std::ldexp(1.0, e));
    vs.push_back(std::nextafter(std::ldexp(1.0, e), 0.0));
    vs.push_back(std::nextafter(std::ldexp(1.0, e), HUGE_VAL));
  }
  for (int e = -323; e <= 308; ++e) {
    const double p = std::pow(10.0, e);
    for (double v : {p, std::nextafter(p, 0.0), std::nextafter(p, HUGE_VAL), 1.5 * p, 9.5 * p})
      if (std::isfinite(v)) vs.push_back(v);
  }
  for (uint64_t i = 0; i < 100000; ++i) vs.push_back(static_cast<double>(i));
  for (double v : vs) {
    ASSERT_EQ(json_double_text(v), nlohmann_double_text(v)) << std::hexfloat << v;
    ASSERT_EQ(json_double_text(-v), nlohmann_double_text(-v)) << std::hexfloat << -v;
  }
}

TEST(JsonDouble, RandomDoubles) {
  std::mt19937_64 rng(20261202);
  // Every finite bit pattern is equally likely: all exponents, denormals included.
  for (int i = 0; i < 1000000; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    ASSERT_EQ(json_double_text(v), nlohmann_double_text(v)) << std::hexfloat << v;
  }
  // What reports hold: cosines near 1, errors and fractions from 1e-12 to 1e3, few-digit decimals.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 250000; ++i) {
    const double u = unit(rng);
    for (double v : {1.0 - u * 1e-6, u * std::pow(10.0, -12.0 + 15.0 * unit(rng)),
                     std::round(u * 1e6) / 1e4, static_cast<float>(u) * 100.0})
      ASSERT_EQ(json_double_text(v), nlohmann_double_text(v)) << std::hexfloat << v;
  }
}

}  // namespace
