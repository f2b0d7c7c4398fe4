// Shared plumbing of the C ABI shim (include/driftscope.h): the handle structs, the thread-local
// last error and the exception barrier every exported function goes through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope.h"
#include "driftscope/error.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"
#include "driftscope/writer.hpp"

struct ds_filter {
  driftscope::Filter filter;
};

struct ds_writer {
  std::unique_ptr<driftscope::Writer> writer;
};

// The C view of one reader record. The joined axis string is built once at open because the C++
// record keeps axes as a vector and the C struct hands out one NUL-terminated string.
struct ds_record {
  const driftscope::Record* record = nullptr;
  size_t position = 0;
  std::string axes;
};

struct ds_reader {
  explicit ds_reader(driftscope::Reader&& r) : reader(std::move(r)) {}
  driftscope::Reader reader;
  std::vector<ds_record> records;  // parallel to reader.records()
};

namespace driftscope::capi {

// Records `e` as this thread's last error and returns its negative status.
int fail(const Error& e) noexcept;
int fail(int status, std::string_view message) noexcept;
void clear_error() noexcept;

// Builds the error without the formatting a message needs when the status alone says it all.
inline int fail_null(const char* what) noexcept {
  return fail(DS_E_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

// Hands `text` out with snprintf semantics: truncated to capacity - 1 bytes, always terminated
// (when capacity > 0), the full length returned so the caller can size a second call.
inline int64_t copy_out(std::string_view text, char* buf, size_t capacity) noexcept {
  if (capacity > 0) {
    size_t n = text.size() < capacity ? text.size() : capacity - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int64_t>(text.size());
}

// The exception barrier: no C++ exception crosses the ABI. bad_alloc becomes DS_E_OUT_OF_MEMORY,
// anything else DS_E_INTERNAL with its what().
template <class F>
auto guarded(F&& f) noexcept -> decltype(f()) {
  clear_error();
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return static_cast<decltype(f())>(fail(DS_E_OUT_OF_MEMORY, "out of memory"));
  } catch (const std::exception& e) {
    return static_cast<decltype(f())>(fail(DS_E_INTERNAL, e.what()));
  } catch (...) {
    return static_cast<decltype(f())>(fail(DS_E_INTERNAL, "unknown C++ exception"));
  }
}

// Validates a C descriptor and converts it; every count is checked against the format's limits
// before anything is allocated from it.
Result<TensorInfo> to_tensor_info(const ds_tensor_desc* desc);

// Checks the struct_size contract of an options/descriptor struct (see driftscope.h).
Result<void> check_struct_size(size_t given, size_t expected, const char* type);
// The same for a struct that grew: `given` may also be the size of an earlier release of it
// (`earlier`), whose fields are a prefix of today's; the caller then reads only those.
Result<void> check_struct_size(size_t given, size_t expected, std::initializer_list<size_t> earlier,
                               const char* type);

}  // namespace driftscope::capi
