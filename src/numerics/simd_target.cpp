// include/driftscope/simd.hpp: the kernels' SIMD target, chosen by name or by DRIFTSCOPE_SIMD.
#include "driftscope/simd.hpp"

#include <cstdlib>
#include <string>

#include "numerics/pair_kernel.hpp"

namespace driftscope {

// Taken before any cap (use_simd_target asks first), which narrows kernel::targets().
std::vector<std::string> simd_targets() {
  static const std::vector<std::string> all = numerics::kernel::targets();
  return all;
}

std::string simd_target() { return numerics::kernel::current(); }

Result<void> use_simd_target(std::string_view name) {
  const std::vector<std::string> all = simd_targets();
  if (numerics::kernel::cap(std::string(name))) return {};
  std::string choices;
  for (const auto& t : all) choices += (choices.empty() ? "" : ", ") + t;
  return make_error(Errc::invalid_argument,
                    "SIMD target '" + std::string(name) + "' is not one this build runs on this CPU (" +
                        choices + ")");
}

Result<void> use_simd_target_from_env() {
  const char* env = std::getenv("DRIFTSCOPE_SIMD");
  if (env == nullptr || *env == '\0') return {};
  auto r = use_simd_target(env);
  if (!r) return make_error(Errc::invalid_argument, "DRIFTSCOPE_SIMD: " + r.error().message);
  return {};
}

}  // namespace driftscope
