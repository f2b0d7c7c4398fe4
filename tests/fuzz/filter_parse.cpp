// libFuzzer target for the filter syntax (Filter::parse, src/format/filter.cpp): any input parses
// or is a filter_syntax error; a parsed filter prints to text that parses to the same filter
// (to_string is a fixed point) and judges tensors alike. Any crash, hang, leak, sanitizer report
// or broken round trip is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "driftscope/filter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace driftscope;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = Filter::parse(text);
  if (!f.ok()) {
    if (f.error().code != Errc::filter_syntax) std::abort();
    return 0;
  }
  const std::string printed = f->to_string();
  auto again = Filter::parse(printed);
  if (!again.ok() || again->to_string() != printed) std::abort();
  if (again->byte_budget() != f->byte_budget() || again->empty() != f->empty()) std::abort();

  // The same verdicts for a few tensors whose name and shape come from the input itself.
  TensorInfo info;
  info.name = std::string(text.substr(0, 64));
  info.op_type = std::string(text.substr(size / 2, 16));
  info.dtype = size % 2 ? DType::f16 : DType::f32;
  for (size_t i = 0; i < size % 5; ++i) info.shape.push_back(size > i ? data[i] : 1);
  for (uint64_t exec = 0; exec < 4; ++exec) {
    info.role = exec % 2 ? Role::input : Role::output;
    if (f->accepts(info, exec) != again->accepts(info, exec)) std::abort();
  }
  if (f->may_accept_name(info.name) != again->may_accept_name(info.name)) std::abort();
  (void)glob_match(text, info.name);
  return 0;
}
