// ds_hash_fill_* (include/driftscope.h) over driftscope::reference (include/driftscope/reference.hpp).
#include <span>
#include <string>
#include <string_view>

#include "capi_internal.hpp"
#include "driftscope/reference.hpp"

using namespace driftscope;

namespace {

Result<reference::Distribution> to_distribution(int32_t d) {
  if (d == DS_HASH_UNIFORM) return reference::Distribution::uniform;
  if (d == DS_HASH_NORMAL) return reference::Distribution::normal;
  return make_error(Errc::invalid_argument,
                    "distribution is " + std::to_string(d) + ", allowed 0 (uniform) or 1 (normal)");
}

template <class T>
int fill(const char* name, size_t name_len, int32_t distribution, double std_dev, uint64_t seed,
         uint64_t first, T* out, size_t count) {
  return capi::guarded([&]() -> int {
    if (!name && name_len > 0) return capi::fail_null("name");
    if (!out && count > 0) return capi::fail_null("out");
    auto d = to_distribution(distribution);
    if (!d) return capi::fail(d.error());
    auto r = reference::hash_fill(std::string_view(name ? name : "", name_len), *d, std_dev,
                                  std::span<T>(out, count), seed, first);
    return r ? DS_OK : capi::fail(r.error());
  });
}

}  // namespace

extern "C" int ds_hash_fill_f32(const char* name, size_t name_len, int32_t distribution,
                                double std_dev, uint64_t seed, uint64_t first, float* out,
                                size_t count) {
  return fill(name, name_len, distribution, std_dev, seed, first, out, count);
}

extern "C" int ds_hash_fill_f64(const char* name, size_t name_len, int32_t distribution,
                                double std_dev, uint64_t seed, uint64_t first, double* out,
                                size_t count) {
  return fill(name, name_len, distribution, std_dev, seed, first, out, count);
}

extern "C" int ds_hash_fill_i64(const char* name, size_t name_len, int64_t low, int64_t high,
                                uint64_t seed, uint64_t first, int64_t* out, size_t count) {
  return capi::guarded([&]() -> int {
    if (!name && name_len > 0) return capi::fail_null("name");
    if (!out && count > 0) return capi::fail_null("out");
    auto r = reference::hash_fill_integers(std::string_view(name ? name : "", name_len), low, high,
                                           std::span<int64_t>(out, count), seed, first);
    return r ? DS_OK : capi::fail(r.error());
  });
}
