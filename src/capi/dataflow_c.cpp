// C ABI: the data-flow attribute ds.inputs (include/driftscope/dataflow.hpp, docs/format.md §3.3.3).
#include <string>
#include <vector>

#include "capi/capi_internal.hpp"
#include "driftscope/dataflow.hpp"

using namespace driftscope;

extern "C" {

int64_t ds_format_inputs(const ds_tensor_ref* refs, size_t count, char* buf, size_t capacity) {
  return capi::guarded([&]() -> int64_t {
    if (!refs && count > 0) return capi::fail_null("refs");
    if (!buf && capacity > 0) return capi::fail_null("buf");
    std::vector<TensorRef> list;
    list.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const ds_tensor_ref& r = refs[i];
      std::string where = "refs[" + std::to_string(i) + "]";
      if (!r.name || !*r.name) return capi::fail(DS_E_INVALID_ARGUMENT, where + ".name is NULL or empty");
      if (r.role < DS_ROLE_OUTPUT || r.role > DS_ROLE_OTHER)
        return capi::fail(DS_E_INVALID_ARGUMENT, where + ".role is " + std::to_string(r.role));
      list.push_back({r.name, static_cast<Role>(r.role), r.role_index, r.occurrence});
    }
    std::string text = format_inputs(list);
    return capi::copy_out(text, buf, capacity);
  });
}

}  // extern "C"
