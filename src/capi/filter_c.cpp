// C ABI: filters (include/driftscope/filter.hpp, docs/filters.md).

#include "capi/capi_internal.hpp"

using namespace driftscope;

extern "C" {

int ds_filter_parse(const char* text, ds_filter** out) {
  return capi::guarded([&]() -> int {
    if (!out) return capi::fail_null("out");
    *out = nullptr;
    if (!text) return capi::fail_null("text");
    auto parsed = Filter::parse(text);
    if (!parsed) return capi::fail(parsed.error());
    *out = new ds_filter{std::move(*parsed)};
    return DS_OK;
  });
}

void ds_filter_free(ds_filter* filter) { delete filter; }

int ds_filter_accepts(const ds_filter* filter, const ds_tensor_desc* desc, uint64_t exec_index) {
  return capi::guarded([&]() -> int {
    if (!filter) return capi::fail_null("filter");
    auto info = capi::to_tensor_info(desc);
    if (!info) return capi::fail(info.error());
    return filter->filter.accepts(*info, exec_index) ? 1 : 0;
  });
}

int ds_filter_may_accept_name(const ds_filter* filter, const char* name) {
  return capi::guarded([&]() -> int {
    if (!filter) return capi::fail_null("filter");
    if (!name) return capi::fail_null("name");
    return filter->filter.may_accept_name(name) ? 1 : 0;
  });
}

int ds_filter_budget(const ds_filter* filter, uint64_t* bytes) {
  return capi::guarded([&]() -> int {
    if (!filter) return capi::fail_null("filter");
    auto budget = filter->filter.byte_budget();
    if (!budget) return 0;
    if (bytes) *bytes = *budget;
    return 1;
  });
}

int64_t ds_filter_to_string(const ds_filter* filter, char* buf, size_t capacity) {
  return capi::guarded([&]() -> int64_t {
    if (!filter) return capi::fail_null("filter");
    if (!buf && capacity > 0) return capi::fail_null("buf");
    std::string text = filter->filter.to_string();
    return capi::copy_out(text, buf, capacity);
  });
}

}  // extern "C"
