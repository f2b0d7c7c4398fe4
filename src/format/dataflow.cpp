// The reserved attributes ds.inputs and ds.kind (docs/format.md §3.3.3).
#include "driftscope/dataflow.hpp"

#include <charconv>

#include "driftscope/limits.hpp"

namespace driftscope {

std::string_view tensor_kind_name(TensorKind k) noexcept {
  switch (k) {
    case TensorKind::value: return "float";
    case TensorKind::index: return "index";
    case TensorKind::shape: return "shape";
    case TensorKind::mask: return "mask";
  }
  return "float";
}

std::optional<TensorKind> parse_tensor_kind(std::string_view text) noexcept {
  for (TensorKind k : {TensorKind::value, TensorKind::index, TensorKind::shape, TensorKind::mask})
    if (text == tensor_kind_name(k)) return k;
  return std::nullopt;
}

std::string format_inputs(const std::vector<TensorRef>& refs) {
  std::string out;
  for (size_t i = 0; i < refs.size(); ++i) {
    const TensorRef& r = refs[i];
    if (i) out += ',';
    out += role_name(r.role);
    out += '/' + std::to_string(r.role_index) + '/' + std::to_string(r.occurrence) + ':';
    for (char c : r.name()) {
      if (c == '\\' || c == ',') out += '\\';  // the only two escapes of the grammar
      out += c;
    }
  }
  return out;
}

namespace {

Error bad(size_t pos, const std::string& what) {
  return make_error(Errc::bad_value, "ds.inputs: " + what + " at byte " + std::to_string(pos));
}

// A decimal number without leading zeros (except "0") up to `max`, ending at `stop`.
Result<uint64_t> number(std::string_view s, size_t& pos, char stop, uint64_t max,
                        const char* what) {
  size_t start = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
  if (pos == start || pos >= s.size() || s[pos] != stop)
    return bad(start, std::string("expected ") + what + " followed by '" + stop + "'");
  if (s[start] == '0' && pos - start > 1) return bad(start, std::string(what) + " has a leading zero");
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + start, s.data() + pos, v);
  if (ec != std::errc() || p != s.data() + pos || v > max)
    return bad(start, std::string(what) + " is out of range");
  ++pos;  // the separator
  return v;
}

}  // namespace

Result<std::vector<TensorRef>> parse_inputs(std::string_view s) {
  std::vector<TensorRef> refs;
  size_t pos = 0;
  if (s.empty()) return refs;
  while (true) {
    Role ref_role = Role::output;
    size_t slash = s.find('/', pos);
    if (slash == std::string_view::npos) return bad(pos, "expected a role followed by '/'");
    std::string_view role = s.substr(pos, slash - pos);
    bool known = false;
    for (Role c : {Role::output, Role::input, Role::parameter, Role::other})
      if (role == role_name(c)) ref_role = c, known = true;
    if (!known) return bad(pos, "unknown role");
    pos = slash + 1;
    auto ri = number(s, pos, '/', 0xFFFF, "role_index");
    if (!ri) return ri.error();
    auto oc = number(s, pos, ':', 0xFFFFFFFFu, "occurrence");
    if (!oc) return oc.error();
    size_t name_start = pos;
    std::string name;
    while (pos < s.size() && s[pos] != ',') {
      if (s[pos] == '\\') {
        if (pos + 1 >= s.size() || (s[pos + 1] != '\\' && s[pos + 1] != ','))
          return bad(pos, "'\\' must be followed by '\\' or ','");
        ++pos;
      }
      name += s[pos++];
    }
    if (name.empty()) return bad(name_start, "empty name");
    if (name.size() > limits::kMaxNameLength) return bad(name_start, "name longer than 4096 bytes");
    refs.emplace_back(name, ref_role, static_cast<uint16_t>(*ri), static_cast<uint32_t>(*oc));
    if (pos == s.size()) return refs;
    ++pos;  // ','
  }
}

}  // namespace driftscope
