#include "driftscope/tensor.hpp"

#include "common/bytes.hpp"

namespace driftscope {

std::string_view role_name(Role r) noexcept {
  switch (r) {
    case Role::output: return "output";
    case Role::input: return "input";
    case Role::parameter: return "parameter";
    case Role::other: return "other";
  }
  return "invalid";
}

uint64_t TensorInfo::numel() const noexcept {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    auto m = detail::checked_mul(n, d);
    if (!m) return ~uint64_t{0};
    n = *m;
  }
  return n;
}

std::string join_axes(const std::vector<std::string>& axes) {
  std::string out;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) out += ',';
    out += axes[i];
  }
  return out;
}

std::vector<std::string> split_axes(std::string_view axes) {
  std::vector<std::string> out;
  if (axes.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = axes.find(',', start);
    out.emplace_back(axes.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                       : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace driftscope
