#include "safetensors.hpp"

#include <algorithm>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driftscope/limits.hpp"
#include "util.hpp"

namespace driftscope::cli {

namespace {

Error st_error(std::string message, uint64_t offset = kNoOffset) {
  return make_error(Errc::bad_safetensors, std::move(message), offset);
}

struct DTypeName {
  std::string_view name;
  DType dtype;
};
// safetensors' Dtype enum, spelled as its JSON header spells it.
constexpr DTypeName kDTypes[] = {
    {"F64", DType::f64},  {"F32", DType::f32},  {"F16", DType::f16},
    {"BF16", DType::bf16}, {"F8_E4M3", DType::f8e4m3fn}, {"F8_E5M2", DType::f8e5m2},
    {"I64", DType::i64},  {"I32", DType::i32},  {"I16", DType::i16},
    {"I8", DType::i8},    {"U8", DType::u8},    {"BOOL", DType::boolean},
    {"U16", DType::u16},  {"U32", DType::u32},  {"U64", DType::u64},
};

// The header is at most 100 MB of JSON; a tensor entry is 3 levels deep. Deeper nesting is
// refused while parsing, so a hostile header cannot build a deep tree.
constexpr int kMaxDepth = 4;

}  // namespace

std::string_view safetensors_dtype(DType t) noexcept {
  for (const auto& r : kDTypes)
    if (r.dtype == t) return r.name;
  return {};
}

std::string safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto& e : entries) {
    h[e.name] = {{"dtype", safetensors_dtype(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {off, off + e.bytes}}};
    off += e.bytes;
  }
  std::string js = h.dump();
  js.append((8 - js.size() % 8) % 8, ' ');
  std::string out;
  put_le<uint64_t>(out, js.size());
  return out + js;
}

bool looks_like_safetensors(std::span<const std::byte> b) {
  if (b.size() < 9) return false;
  uint64_t n = load_le<uint64_t>(b.data());
  if (n < 2 || n > b.size() - 8) return false;
  return static_cast<char>(b[8]) == '{';
}

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> b) {
  using json = nlohmann::ordered_json;
  if (b.size() < 8)
    return st_error(fmt::format("file of {} bytes is shorter than the 8-byte header size", b.size()));
  const uint64_t n = load_le<uint64_t>(b.data());
  if (n > kMaxSafetensorsHeader)
    return st_error(fmt::format("header size {} exceeds the limit of {} bytes", n,
                                kMaxSafetensorsHeader), 0);
  if (n > b.size() - 8)
    return st_error(fmt::format("header size {} runs past the end of the file ({} bytes)", n,
                                b.size()), 0);
  std::string_view text(reinterpret_cast<const char*>(b.data() + 8), n);
  if (text.empty() || text[0] != '{')
    return st_error("header does not start with '{'", 8);

  // Duplicate names would make two readers disagree on which bytes a tensor has.
  std::vector<std::set<std::string>> keys_at_depth(kMaxDepth + 2);
  std::string duplicate;
  bool too_deep = false;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth > kMaxDepth) {
      too_deep = true;
      return false;
    }
    if (ev == json::parse_event_t::object_start && depth + 1 < static_cast<int>(keys_at_depth.size()))
      keys_at_depth[static_cast<size_t>(depth + 1)].clear();
    if (ev == json::parse_event_t::key && parsed.is_string() &&
        !keys_at_depth[static_cast<size_t>(depth)].insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json h = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (too_deep) return st_error(fmt::format("header JSON is nested deeper than {} levels", kMaxDepth), 8);
  if (h.is_discarded())
    return st_error("header is not valid JSON (or not valid UTF-8)", 8);
  if (!h.is_object()) return st_error("header is not a JSON object", 8);
  if (!duplicate.empty())
    return st_error(fmt::format("key {} appears twice in the header", quote(duplicate)), 8);

  SafetensorsFile f;
  f.header_size = n;
  const uint64_t data_start = 8 + n;
  const uint64_t data_len = b.size() - data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return st_error("__metadata__ is not an object of strings", 8);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return st_error(fmt::format("__metadata__ value of {} is not a string", quote(m.key())), 8);
        f.metadata.emplace_back(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    auto bad = [&](std::string why) {
      return st_error(fmt::format("tensor {}: {}", quote(name), why), 8);
    };
    if (!v.is_object()) return bad("entry is not an object");
    for (auto k = v.begin(); k != v.end(); ++k)
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
        return bad(fmt::format("unknown field {}", quote(k.key())));
    if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return bad("missing one of dtype, shape, data_offsets");
    SafetensorsTensor t;
    t.name = name;
    const json& dt = v["dtype"];
    if (!dt.is_string()) return bad("dtype is not a string");
    auto dname = dt.get<std::string>();
    auto row = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                            [&](const DTypeName& r) { return r.name == dname; });
    if (row == std::end(kDTypes))
      return bad(fmt::format("dtype {} is not supported by TDUMP", quote(dname)));
    t.dtype = row->dtype;
    const json& sh = v["shape"];
    if (!sh.is_array()) return bad("shape is not an array");
    if (sh.size() > limits::kMaxRank)
      return bad(fmt::format("rank {} exceeds the TDUMP limit of {}", sh.size(), limits::kMaxRank));
    uint64_t numel = 1;
    for (const auto& d : sh) {
      if (!d.is_number_unsigned()) return bad("shape entry is not a non-negative integer");
      uint64_t dim = d.get<uint64_t>();
      auto m = checked_mul(numel, dim);
      if (!m) return bad("shape product overflows 64 bits");
      numel = *m;
      t.shape.push_back(dim);
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return bad("data_offsets is not [begin, end]");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.end < t.begin)
      return bad(fmt::format("data_offsets [{}, {}] end before they begin", t.begin, t.end));
    auto nbytes = checked_mul(numel, dtype_size(t.dtype));
    if (!nbytes) return bad("byte size overflows 64 bits");
    if (t.end - t.begin != *nbytes)
      return bad(fmt::format("shape {} of {} needs {} bytes, data_offsets [{}, {}] hold {}",
                             fmt_shape(t.shape, false), dname, *nbytes, t.begin, t.end,
                             t.end - t.begin));
    f.tensors.push_back(std::move(t));
  }
  // The data buffer is the tensors back to back: sorted by offset, each begins where the
  // previous ended, and the last ends at the end of the file.
  std::stable_sort(f.tensors.begin(), f.tensors.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& c) {
                     return a.begin != c.begin ? a.begin < c.begin : a.end < c.end;
                   });
  uint64_t expect = 0;
  for (auto& t : f.tensors) {
    if (t.begin != expect)
      return st_error(fmt::format("tensor {}: data_offsets begin at {}, expected {} (holes and "
                                  "overlaps are invalid)", quote(t.name), t.begin, expect),
                      data_start + std::min(t.begin, data_len));
    if (t.end > data_len)
      return st_error(fmt::format("tensor {}: data_offsets end at {}, past the {}-byte data "
                                  "buffer", quote(t.name), t.end, data_len), data_start);
    expect = t.end;
    t.data = b.subspan(data_start + t.begin, t.end - t.begin);
    if (t.dtype == DType::boolean)
      for (size_t e = 0; e < t.data.size(); ++e)
        if (static_cast<uint8_t>(t.data[e]) > 1)
          return st_error(fmt::format("tensor {}: bool element {} holds byte {}, not 0 or 1",
                                      quote(t.name), e, static_cast<uint8_t>(t.data[e])),
                          data_start + t.begin + e);
  }
  if (expect != data_len)
    return st_error(fmt::format("tensors cover {} bytes but the data buffer has {}", expect,
                                data_len), data_start + expect);
  return f;
}

}  // namespace driftscope::cli
