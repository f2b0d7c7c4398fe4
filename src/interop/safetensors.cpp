#include "interop/safetensors.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bytes.hpp"
#include "driftscope/limits.hpp"
#include "interop/quote.hpp"

namespace driftscope::interop {

using detail::checked_mul;
using detail::load_le;
using detail::put_le;

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

// A JSON array of integers as an entry's field holds it: the first kMaxRank + 1 values (enough to
// know a rank is too large), their count, and whether every element was a non-negative integer.
struct IntArray {
  bool present = false;
  bool is_array = false;
  bool all_unsigned = true;
  uint64_t count = 0;
  uint64_t v[limits::kMaxRank + 1] = {};
  void add(bool is_unsigned, uint64_t value) {
    if (!is_unsigned) all_unsigned = false;
    if (count < std::size(v)) v[count] = value;
    ++count;
  }
};

// One top-level member of the header as the parser saw it, validated when it ends.
struct RawEntry {
  std::string name;
  bool is_object = false;
  bool dtype_present = false, dtype_is_string = false;
  std::string dtype;
  IntArray shape, offsets;
  std::string unknown_field;  // first field that is none of the three
};

// Streams the header through nlohmann's SAX interface and validates each tensor entry as soon as
// it ends, keeping no JSON tree. (nlohmann's ordered_json finds keys by linear search, which made
// a header of n tensors cost O(n^2): issue 7, bug 7. Here every step is O(1) amortised: keys are
// checked for duplicates through one hash set per object.)
class HeaderParser : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HeaderParser(SafetensorsFile& out) : out_(out) {}

  bool too_deep = false;
  bool syntax_error = false;
  std::string duplicate;            // first key seen twice in one object
  std::optional<Error> entry_error;  // first invalid entry, in header order

  bool null() override { return scalar(Scalar{}); }
  bool boolean(bool) override { return scalar(Scalar{}); }
  bool number_integer(number_integer_t v) override {
    return scalar(Scalar{Scalar::integer, v >= 0, static_cast<uint64_t>(v), nullptr});
  }
  bool number_unsigned(number_unsigned_t v) override {
    return scalar(Scalar{Scalar::integer, true, v, nullptr});
  }
  bool number_float(number_float_t, const string_t&) override { return scalar(Scalar{}); }
  bool string(string_t& v) override { return scalar(Scalar{Scalar::string, false, 0, &v}); }
  bool binary(binary_t&) override { return scalar(Scalar{}); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (!keys_[depth_ - 1].insert(k).second && duplicate.empty()) duplicate = k;
    if (depth_ == 1) {
      entry_ = RawEntry{};
      entry_.name = std::move(k);
    } else if (depth_ == 2) {
      field_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    syntax_error = true;
    return false;
  }

 private:
  struct Scalar {
    enum Kind { other, integer, string } kind = other;
    bool is_unsigned = false;
    uint64_t u = 0;
    std::string* s = nullptr;
  };

  SafetensorsFile& out_;
  int depth_ = 0;  // containers open
  std::unordered_set<std::string> keys_[kMaxDepth];
  RawEntry entry_;
  std::string field_;
  bool in_metadata_ = false;

  void fail(Error e) {
    if (!entry_error) entry_error = std::move(e);
  }
  IntArray* array_field() {
    if (field_ == "shape") return &entry_.shape;
    if (field_ == "data_offsets") return &entry_.offsets;
    return nullptr;
  }
  void note_field() {
    if (field_ != "dtype" && field_ != "shape" && field_ != "data_offsets" &&
        entry_.unknown_field.empty())
      entry_.unknown_field = field_;
  }

  bool scalar(const Scalar& v) {
    if (depth_ == 0) return true;  // not an object: the text starts with '{', so unreachable
    if (depth_ == 1) {             // a top-level member that is not an object
      if (entry_.name == "__metadata__")
        fail(st_error("__metadata__ is not an object of strings", 8));
      else
        finish_entry();
      return true;
    }
    if (depth_ == 2) {
      if (in_metadata_) {
        if (v.kind != Scalar::string)
          fail(st_error(fmt::format("__metadata__ value of {} is not a string", quote(field_)), 8));
        else if (!entry_error)
          out_.metadata.emplace_back(std::move(field_), std::move(*v.s));
        return true;
      }
      note_field();
      if (field_ == "dtype") {
        entry_.dtype_present = true;
        entry_.dtype_is_string = v.kind == Scalar::string;
        if (v.s) entry_.dtype = std::move(*v.s);
      } else if (IntArray* a = array_field()) {
        a->present = true;  // not an array: is_array stays false
      }
      return true;
    }
    if (depth_ == 3 && !in_metadata_)
      if (IntArray* a = array_field()) a->add(v.kind == Scalar::integer && v.is_unsigned, v.u);
    return true;  // deeper values only matter as "not an integer", noted when their container opens
  }

  bool open(bool object) {
    if (depth_ >= kMaxDepth) {
      too_deep = true;
      return false;
    }
    if (depth_ == 1) {
      in_metadata_ = entry_.name == "__metadata__";
      if (in_metadata_ && !object) fail(st_error("__metadata__ is not an object of strings", 8));
      entry_.is_object = object;
    } else if (depth_ == 2) {
      if (in_metadata_) {
        fail(st_error(fmt::format("__metadata__ value of {} is not a string", quote(field_)), 8));
      } else {
        note_field();
        if (field_ == "dtype") entry_.dtype_present = true;
        if (IntArray* a = array_field()) {
          a->present = true;
          a->is_array = !object;
        }
      }
    } else if (depth_ == 3 && !in_metadata_) {
      if (IntArray* a = array_field()) a->add(false, 0);
    }
    // A fresh set rather than clear() once it has grown: clear() costs its bucket count, and
    // the set of one large object (__metadata__) would make every later entry pay for it.
    if (keys_[depth_].bucket_count() > 64) keys_[depth_] = {};
    else keys_[depth_].clear();
    ++depth_;
    return true;
  }

  bool close() {
    --depth_;
    if (depth_ == 1) {
      if (in_metadata_) in_metadata_ = false;
      else finish_entry();
    }
    return true;
  }

  // The checks of safetensors' Metadata::validate for one entry, in the order they report.
  void finish_entry() {
    if (entry_error) return;  // only the first error is reported; keep scanning for syntax
    const RawEntry& e = entry_;
    auto bad = [&](std::string why) {
      fail(st_error(fmt::format("tensor {}: {}", quote(e.name), why), 8));
    };
    if (!e.is_object) return bad("entry is not an object");
    if (!e.unknown_field.empty()) return bad(fmt::format("unknown field {}", quote(e.unknown_field)));
    if (!e.dtype_present || !e.shape.present || !e.offsets.present)
      return bad("missing one of dtype, shape, data_offsets");
    if (!e.dtype_is_string) return bad("dtype is not a string");
    auto row = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                            [&](const DTypeName& r) { return r.name == e.dtype; });
    if (row == std::end(kDTypes))
      return bad(fmt::format("dtype {} is not supported by TDUMP", quote(e.dtype)));
    if (!e.shape.is_array) return bad("shape is not an array");
    if (e.shape.count > limits::kMaxRank)
      return bad(fmt::format("rank {} exceeds the TDUMP limit of {}", e.shape.count,
                             limits::kMaxRank));
    SafetensorsTensor t;
    t.dtype = row->dtype;
    uint64_t numel = 1;
    for (uint64_t i = 0; i < e.shape.count; ++i) {
      if (!e.shape.all_unsigned) return bad("shape entry is not a non-negative integer");
      auto m = checked_mul(numel, e.shape.v[i]);
      if (!m) return bad("shape product overflows 64 bits");
      numel = *m;
      t.shape.push_back(e.shape.v[i]);
    }
    if (!e.offsets.is_array || e.offsets.count != 2 || !e.offsets.all_unsigned)
      return bad("data_offsets is not [begin, end]");
    t.begin = e.offsets.v[0];
    t.end = e.offsets.v[1];
    if (t.end < t.begin)
      return bad(fmt::format("data_offsets [{}, {}] end before they begin", t.begin, t.end));
    auto nbytes = checked_mul(numel, dtype_size(t.dtype));
    if (!nbytes) return bad("byte size overflows 64 bits");
    if (t.end - t.begin != *nbytes)
      return bad(fmt::format("shape {} of {} needs {} bytes, data_offsets [{}, {}] hold {}",
                             fmt_shape(t.shape), e.dtype, *nbytes, t.begin, t.end,
                             t.end - t.begin));
    t.name = std::move(entry_.name);
    out_.tensors.push_back(std::move(t));
  }
};

// A JSON string literal; the text is UTF-8 (checked by the caller), so only quotes, backslashes
// and control characters need escaping.
void put_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  out += '"';
}

}  // namespace

std::string_view safetensors_dtype(DType t) noexcept {
  for (const auto& r : kDTypes)
    if (r.dtype == t) return r.name;
  return {};
}

Result<std::string> safetensors_header(
    const std::vector<SafetensorsEntry>& entries,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  // Written as text rather than through a JSON object: keys stay in this order, and the cost is
  // linear in the number of tensors.
  auto check = [](std::string_view s, std::string_view what) -> Result<void> {
    if (!detail::valid_utf8(s))
      return make_error(Errc::bad_utf8,
                        fmt::format("{} {} is not valid UTF-8; safetensors headers are JSON",
                                    what, quote(s)));
    return {};
  };
  std::string js = "{";
  if (!metadata.empty()) {
    js += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      DRIFTSCOPE_TRY(check(metadata[i].first, "metadata key"));
      DRIFTSCOPE_TRY(check(metadata[i].second, "metadata value"));
      if (i) js += ',';
      put_json_string(js, metadata[i].first);
      js += ':';
      put_json_string(js, metadata[i].second);
    }
    js += '}';
  }
  uint64_t off = 0;
  for (const auto& e : entries) {
    DRIFTSCOPE_TRY(check(e.name, "tensor name"));
    if (js.size() > 1) js += ',';
    put_json_string(js, e.name);
    js += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[", safetensors_dtype(e.dtype));
    for (size_t i = 0; i < e.shape.size(); ++i) {
      if (i) js += ',';
      js += std::to_string(e.shape[i]);
    }
    js += fmt::format("],\"data_offsets\":[{},{}]}}", off, off + e.bytes);
    off += e.bytes;
  }
  js += '}';
  // Padded with spaces so the data buffer starts 8-byte aligned, as safetensors writes it.
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

  SafetensorsFile f;
  f.header_size = n;
  HeaderParser hp(f);
  bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &hp,
                                          nlohmann::json::input_format_t::json, /*strict=*/true);
  if (hp.too_deep)
    return st_error(fmt::format("header JSON is nested deeper than {} levels", kMaxDepth), 8);
  if (!parsed || hp.syntax_error)
    return st_error("header is not valid JSON (or not valid UTF-8)", 8);
  // Duplicate names would make two readers disagree on which bytes a tensor has.
  if (!hp.duplicate.empty())
    return st_error(fmt::format("key {} appears twice in the header", quote(hp.duplicate)), 8);
  if (hp.entry_error) return std::move(*hp.entry_error);
  const uint64_t data_start = 8 + n;
  const uint64_t data_len = b.size() - data_start;
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

}  // namespace driftscope::interop
