#include "format/codec.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "driftscope/limits.hpp"
#include "format/layout.hpp"

namespace driftscope::detail {

namespace {

// The duplicate-key test of one record's attributes. A record holds a handful, so comparing a key
// with the ones before it costs less than a hash set's node allocations, which were ~6% of
// reading a million data-flow records (issue 30 §4); past kLinear keys a set keeps a hostile
// record of limits::kMaxAttributes keys linear.
class SeenKeys {
 public:
  // False when `k` was inserted before.
  bool insert(std::string_view k) {
    if (set_.empty()) {
      for (size_t i = 0; i < n_; ++i)
        if (small_[i] == k) return false;
      if (n_ < kLinear) {
        small_[n_++] = k;
        return true;
      }
      set_.insert(small_.begin(), small_.end());
    }
    return set_.insert(k).second;
  }

 private:
  static constexpr size_t kLinear = 16;
  std::array<std::string_view, kLinear> small_{};
  size_t n_ = 0;
  std::unordered_set<std::string_view> set_;
};

uint64_t at(uint64_t base, uint64_t rel) { return base == kNoOffset ? kNoOffset : base + rel; }

Error err(Errc c, uint64_t off, std::string msg) { return make_error(c, std::move(msg), off); }

// The message of an error without the " at offset N" make_error appended, to re-home it.
std::string strip_offset(const Error& e) {
  if (e.offset == kNoOffset) return e.message;
  std::string tail = fmt::format(" (at offset {})", e.offset);
  const std::string& m = e.message;
  if (m.size() >= tail.size() && m.compare(m.size() - tail.size(), tail.size(), tail) == 0)
    return m.substr(0, m.size() - tail.size());
  return m;
}

Result<void> check_string(std::string_view what, std::string_view s, size_t min, size_t max,
                          uint64_t off) {
  if (s.size() < min || s.size() > max)
    return err(s.empty() && min > 0 && what == "name" ? Errc::empty_name : Errc::limit_exceeded, off,
               fmt::format("{} length is {}, allowed {}..{}", what, s.size(), min, max));
  if (!valid_utf8(s)) return err(Errc::bad_utf8, off, fmt::format("{} is not valid UTF-8", what));
  return {};
}

// Bounds-checked little-endian cursor over a meta block.
class Cursor {
 public:
  Cursor(std::span<const std::byte> b, uint64_t base) : b_(b), base_(base) {}
  bool has(size_t n) const { return b_.size() - pos_ >= n; }
  // False at the end of the block (then short_error(field) says so). Not a Result: every meta of
  // a dump is decoded, several times over in a comparison, and a Result per field cost more
  // than the field.
  template <class T>
  bool read(T& v) {
    if (!has(sizeof(T))) return false;
    v = load_le<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  Result<std::string_view> bytes(size_t n, std::string_view field) {
    if (!has(n)) return short_error(field);
    std::string_view v(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return v;
  }
  size_t pos() const { return pos_; }
  uint64_t off() const { return at(base_, pos_); }
  size_t remaining() const { return b_.size() - pos_; }
  Error short_error(std::string_view field) const {
    return err(Errc::length_mismatch, at(base_, pos_),
               fmt::format("meta ends inside field '{}' ({} bytes left)", field, remaining()));
  }

 private:
  std::span<const std::byte> b_;
  uint64_t base_;
  size_t pos_ = 0;
};

#define DS_GET(var, type, cursor, field) \
  type var{};                            \
  if (!(cursor).read(var)) return (cursor).short_error(field)

}  // namespace

// The byte size a shape claims, zero dims skipped (docs/format.md §3.3): one rule for every
// order of the dims, so [2^40, 2^40, 0] and [0, 2^40, 2^40] are judged alike and no valid
// shape has a dim a consumer cannot index with a signed 64-bit integer.
std::optional<uint64_t> shape_bytes(std::span<const uint64_t> shape, uint64_t elem_size) {
  uint64_t n = elem_size;
  for (uint64_t d : shape) {
    if (d == 0) continue;
    auto m = checked_mul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

Result<uint64_t> tensor_payload_size(const TensorInfo& info, uint64_t base) {
  auto n = shape_bytes(info.shape, dtype_size(info.dtype));
  if (!n) return err(Errc::shape_overflow, base, fmt::format("shape of '{}' overflows 64 bits", info.name));
  if (*n > limits::kMaxPayloadLength)
    return err(Errc::limit_exceeded, base,
               fmt::format("shape of '{}' spans {} bytes (zero dims skipped), allowed at most {}", info.name, *n,
                           limits::kMaxPayloadLength));
  return info.numel() == 0 ? 0 : *n;
}

namespace {

// The axis names against the shape: validate_tensor_info's, and the meta decoder's one check of
// them that its field-by-field checks do not make.
Result<void> check_axis_names(const TensorInfo& info, uint64_t base) {
  if (info.axes.empty()) return {};
  if (info.axes.size() != info.shape.size())
    return err(Errc::bad_axes, base, fmt::format("'{}' has {} axis names for rank {}", info.name,
                                                 info.axes.size(), info.shape.size()));
  for (const auto& a : info.axes)
    if (a.empty() || a.find(',') != std::string::npos)
      return err(Errc::bad_axes, base, fmt::format("axis name '{}' of '{}' is empty or has a comma", a, info.name));
  return {};
}

// The encoding against the dtype and the shape (validate_tensor_info and the meta decoder).
Result<void> check_encoding(const TensorInfo& info, uint64_t base) {
  const Encoding& e = info.encoding;
  switch (e.kind) {
    case EncodingKind::raw:
      if (!e.scales.empty() || !e.zero_points.empty())
        return err(Errc::bad_encoding, base, fmt::format("raw tensor '{}' has quantisation parameters", info.name));
      break;
    case EncodingKind::affine_tensor:
    case EncodingKind::affine_channel: {
      if (!dtype_is_integer(info.dtype))
        return err(Errc::bad_encoding, base, fmt::format("affine encoding needs an integer dtype, '{}' is {}",
                                                         info.name, dtype_name(info.dtype)));
      size_t want = 1;
      if (e.kind == EncodingKind::affine_channel) {
        if (e.axis >= info.shape.size())
          return err(Errc::bad_encoding, base, fmt::format("channel axis {} of '{}' is not below rank {}",
                                                           e.axis, info.name, info.shape.size()));
        if (info.shape[e.axis] > (1u << 24))
          return err(Errc::limit_exceeded, base, fmt::format("'{}' has {} channels, allowed at most 16777216",
                                                             info.name, info.shape[e.axis]));
        want = static_cast<size_t>(info.shape[e.axis]);
      }
      if (e.scales.size() != want || e.zero_points.size() != want)
        return err(Errc::bad_encoding, base, fmt::format("'{}' has {} scales and {} zero points, expected {}",
                                                         info.name, e.scales.size(), e.zero_points.size(), want));
      for (double s : e.scales)
        if (!std::isfinite(s))
          return err(Errc::bad_value, base, fmt::format("quantisation scale {} of '{}' is not finite", s, info.name));
      break;
    }
    default:
      return err(Errc::bad_enum, base, fmt::format("encoding {} of '{}' is not 0..2",
                                                   static_cast<unsigned>(e.kind), info.name));
  }
  return {};
}

}  // namespace

Result<void> validate_tensor_info(const TensorInfo& info, uint64_t base) {
  DRIFTSCOPE_TRY(check_string("name", info.name, 1, limits::kMaxNameLength, base));
  DRIFTSCOPE_TRY(check_string("op_type", info.op_type, 0, limits::kMaxOpTypeLength, base));
  if (!dtype_valid(static_cast<uint16_t>(info.dtype)))
    return err(Errc::bad_dtype, base, fmt::format("dtype code {} of '{}' is not defined (valid: 1..15)",
                                                  static_cast<unsigned>(info.dtype), info.name));
  if (info.shape.size() > limits::kMaxRank)
    return err(Errc::limit_exceeded, base, fmt::format("rank of '{}' is {}, allowed at most {}", info.name,
                                                       info.shape.size(), limits::kMaxRank));
  if (static_cast<uint8_t>(info.role) > 3)
    return err(Errc::bad_enum, base, fmt::format("role {} of '{}' is not 0..3", static_cast<unsigned>(info.role), info.name));
  if (!info.axes.empty()) {
    DRIFTSCOPE_TRY(check_axis_names(info, base));
    std::string joined = join_axes(info.axes);
    DRIFTSCOPE_TRY(check_string("axes", joined, 0, limits::kMaxAxesLength, base));
  }
  if (info.attrs.size() > limits::kMaxAttributes)
    return err(Errc::limit_exceeded, base, fmt::format("'{}' has {} attributes, allowed at most {}", info.name,
                                                       info.attrs.size(), limits::kMaxAttributes));
  SeenKeys keys;
  for (const auto& [k, v] : info.attrs) {
    DRIFTSCOPE_TRY(check_string("attribute key", k, 1, limits::kMaxKeyLength, base));
    DRIFTSCOPE_TRY(check_string("attribute value", v, 0, limits::kMaxValueLength, base));
    if (!keys.insert(k))
      return err(Errc::duplicate_key, base, fmt::format("attribute '{}' of '{}' appears twice", k, info.name));
  }
  DRIFTSCOPE_TRY(check_encoding(info, base));
  auto size = tensor_payload_size(info, base);
  if (!size) return std::move(size).error();
  return {};
}

Result<std::string> encode_tensor_meta(const TensorInfo& info) {
  DRIFTSCOPE_TRY(validate_tensor_info(info));
  std::string axes = join_axes(info.axes);
  std::string m;
  m.reserve(kTensorMetaFixedSize + 8 * info.shape.size() + info.name.size() + 64);
  put_le<uint64_t>(m, info.exec_index);
  put_le<uint32_t>(m, info.occurrence);
  put_le<uint16_t>(m, static_cast<uint16_t>(info.dtype));
  put_le<uint8_t>(m, static_cast<uint8_t>(info.shape.size()));
  put_le<uint8_t>(m, static_cast<uint8_t>(info.role));
  put_le<uint16_t>(m, info.role_index);
  put_le<uint8_t>(m, static_cast<uint8_t>(info.encoding.kind));
  put_le<uint8_t>(m, 0);
  put_le<uint32_t>(m, 0);
  put_le<uint16_t>(m, static_cast<uint16_t>(info.name.size()));
  put_le<uint16_t>(m, static_cast<uint16_t>(info.op_type.size()));
  put_le<uint16_t>(m, static_cast<uint16_t>(axes.size()));
  put_le<uint16_t>(m, static_cast<uint16_t>(info.attrs.size()));
  for (uint64_t d : info.shape) put_le<uint64_t>(m, d);
  m += info.name;
  m += info.op_type;
  m += axes;
  for (const auto& [k, v] : info.attrs) {
    put_le<uint16_t>(m, static_cast<uint16_t>(k.size()));
    put_le<uint32_t>(m, static_cast<uint32_t>(v.size()));
    m += k;
    m += v;
  }
  const Encoding& e = info.encoding;
  if (e.kind == EncodingKind::affine_tensor) {
    put_le<double>(m, e.scales[0]);
    put_le<int64_t>(m, e.zero_points[0]);
  } else if (e.kind == EncodingKind::affine_channel) {
    put_le<uint32_t>(m, e.axis);
    put_le<uint32_t>(m, static_cast<uint32_t>(e.scales.size()));
    for (double s : e.scales) put_le<double>(m, s);
    for (int64_t z : e.zero_points) put_le<int64_t>(m, z);
  }
  if (m.size() > limits::kMaxMetaLength)
    return err(Errc::limit_exceeded, kNoOffset, fmt::format("record header of '{}' is {} bytes, allowed at most {}",
                                                            info.name, m.size(), limits::kMaxMetaLength));
  return m;
}

namespace {

// decode_tensor_meta into `info`; `name_read` once the name passed its checks.
Result<void> decode_meta_into(std::span<const std::byte> meta, uint64_t base, TensorInfo& info, bool& name_read) {
  Cursor c(meta, base);
  DS_GET(exec_index, uint64_t, c, "exec_index");
  DS_GET(occurrence, uint32_t, c, "occurrence");
  DS_GET(dtype, uint16_t, c, "dtype");
  DS_GET(rank, uint8_t, c, "rank");
  DS_GET(role, uint8_t, c, "role");
  DS_GET(role_index, uint16_t, c, "role_index");
  DS_GET(encoding, uint8_t, c, "encoding");
  DS_GET(reserved, uint8_t, c, "reserved");
  DS_GET(flags, uint32_t, c, "flags");
  DS_GET(name_len, uint16_t, c, "name_length");
  DS_GET(op_len, uint16_t, c, "op_type_length");
  DS_GET(axes_len, uint16_t, c, "axes_length");
  DS_GET(attr_count, uint16_t, c, "attr_count");
  info.exec_index = exec_index;
  info.occurrence = occurrence;
  if (!dtype_valid(dtype))
    return err(Errc::bad_dtype, at(base, 12), fmt::format("dtype code {} is not defined (valid: 1..15)", dtype));
  info.dtype = static_cast<DType>(dtype);
  if (rank > limits::kMaxRank)
    return err(Errc::limit_exceeded, at(base, 14), fmt::format("rank is {}, allowed at most {}", rank, limits::kMaxRank));
  if (role > 3) return err(Errc::bad_enum, at(base, 15), fmt::format("role is {}, allowed 0..3", role));
  info.role = static_cast<Role>(role);
  info.role_index = role_index;
  if (encoding > 2) return err(Errc::bad_enum, at(base, 18), fmt::format("encoding is {}, allowed 0..2", encoding));
  if (reserved != 0 || flags != 0) {
    // Wholly reserved bytes are reported at the first non-zero byte (docs/format.md §1).
    size_t first = 19;
    while (meta[first] == std::byte{0}) ++first;
    return err(Errc::reserved_nonzero, at(base, first), "reserved tensor meta field is not zero");
  }
  if (name_len == 0) return err(Errc::empty_name, at(base, 24), "tensor name is empty");
  if (name_len > limits::kMaxNameLength)
    return err(Errc::limit_exceeded, at(base, 24), fmt::format("name_length is {}, allowed 1..{}", name_len, limits::kMaxNameLength));
  if (op_len > limits::kMaxOpTypeLength)
    return err(Errc::limit_exceeded, at(base, 26), fmt::format("op_type_length is {}, allowed 0..{}", op_len, limits::kMaxOpTypeLength));
  if (axes_len > limits::kMaxAxesLength)
    return err(Errc::limit_exceeded, at(base, 28), fmt::format("axes_length is {}, allowed 0..{}", axes_len, limits::kMaxAxesLength));
  if (attr_count > limits::kMaxAttributes)
    return err(Errc::limit_exceeded, at(base, 30), fmt::format("attr_count is {}, allowed 0..{}", attr_count, limits::kMaxAttributes));
  const uint64_t dims_off = c.off();
  info.shape.resize(rank);
  for (auto& d : info.shape) {
    DS_GET(dim, uint64_t, c, "dims");
    d = dim;
  }
  uint64_t name_off = c.off();
  auto name = c.bytes(name_len, "name");
  if (!name) return std::move(name).error();
  info.name.assign(*name);
  if (!valid_utf8(info.name)) return err(Errc::bad_utf8, name_off, "tensor name is not valid UTF-8");
  name_read = true;
  // Errors are reported at the failing field (docs/format.md §4), so these checks run here
  // before the generic validation below.
  if (auto size = tensor_payload_size(info, dims_off); !size) return std::move(size).error();
  if (encoding != 0 && !dtype_is_integer(info.dtype))
    return err(Errc::bad_encoding, at(base, 18), fmt::format("affine encoding needs an integer dtype, '{}' is {}",
                                                             info.name, dtype_name(info.dtype)));
  uint64_t op_off = c.off();
  auto op = c.bytes(op_len, "op_type");
  if (!op) return std::move(op).error();
  info.op_type.assign(*op);
  if (!valid_utf8(info.op_type)) return err(Errc::bad_utf8, op_off, fmt::format("op_type of '{}' is not valid UTF-8", info.name));
  uint64_t axes_off = c.off();
  auto axes = c.bytes(axes_len, "axes");
  if (!axes) return std::move(axes).error();
  if (!valid_utf8(*axes)) return err(Errc::bad_utf8, axes_off, fmt::format("axes of '{}' are not valid UTF-8", info.name));
  info.axes = split_axes(*axes);
  info.attrs.reserve(attr_count);
  SeenKeys attr_keys;
  for (uint16_t i = 0; i < attr_count; ++i) {
    // Every failure inside an attribute is reported at the attribute's start (§4).
    const uint64_t attr_off = c.off();
    auto attribute = [&]() -> Result<void> {
      DS_GET(klen, uint16_t, c, "attribute key_length");
      DS_GET(vlen, uint32_t, c, "attribute value_length");
      if (klen == 0 || klen > limits::kMaxKeyLength || vlen > limits::kMaxValueLength)
        return err(Errc::limit_exceeded, attr_off,
                   fmt::format("attribute {} of '{}' has key length {} (1..{}) and value length {} (0..{})", i,
                               info.name, klen, limits::kMaxKeyLength, vlen, limits::kMaxValueLength));
      auto k = c.bytes(klen, "attribute key");
      if (!k) return std::move(k).error();
      auto v = c.bytes(vlen, "attribute value");
      if (!v) return std::move(v).error();
      if (!valid_utf8(*k) || !valid_utf8(*v))
        return err(Errc::bad_utf8, attr_off, fmt::format("attribute {} of '{}' is not valid UTF-8", i, info.name));
      if (!attr_keys.insert(*k))
        return err(Errc::duplicate_key, attr_off, fmt::format("attribute '{}' of '{}' appears twice", *k, info.name));
      info.attrs.emplace_back(std::string(*k), std::string(*v));
      return {};
    };
    if (auto ok = attribute(); !ok) {
      Error e = std::move(ok).error();
      return make_error(e.code, strip_offset(e), attr_off);
    }
  }
  info.encoding.kind = static_cast<EncodingKind>(encoding);
  if (info.encoding.kind == EncodingKind::affine_tensor) {
    const uint64_t scale_off = c.off();
    DS_GET(scale, double, c, "scale");
    if (!std::isfinite(scale))
      return err(Errc::bad_value, scale_off, fmt::format("quantisation scale {} of '{}' is not finite", scale, info.name));
    DS_GET(zp, int64_t, c, "zero_point");
    info.encoding.scales = {scale};
    info.encoding.zero_points = {zp};
  } else if (info.encoding.kind == EncodingKind::affine_channel) {
    uint64_t enc_off = c.off();
    DS_GET(axis, uint32_t, c, "channel axis");
    DS_GET(count, uint32_t, c, "channel count");
    if (axis >= rank || count != info.shape[axis])
      return err(Errc::bad_encoding, enc_off, fmt::format("channel axis {} with count {} does not match the shape of '{}'",
                                                          axis, count, info.name));
    // Both arrays must fit in what is left before anything is allocated for them.
    if (c.remaining() / 16 < count)
      return err(Errc::length_mismatch, enc_off, fmt::format("meta of '{}' is too short for {} channels", info.name, count));
    info.encoding.axis = axis;
    info.encoding.scales.resize(count);
    info.encoding.zero_points.resize(count);
    for (auto& s : info.encoding.scales) {
      const uint64_t scale_off = c.off();
      DS_GET(v, double, c, "scale");
      if (!std::isfinite(v))
        return err(Errc::bad_value, scale_off, fmt::format("quantisation scale {} of '{}' is not finite", v, info.name));
      s = v;
    }
    for (auto& z : info.encoding.zero_points) {
      DS_GET(v, int64_t, c, "zero_point");
      z = v;
    }
  }
  if (c.remaining() != 0)
    return err(Errc::length_mismatch, c.off(), fmt::format("meta of '{}' has {} bytes after its last field", info.name, c.remaining()));
  // The rest of validate_tensor_info: its other checks were all made above, field by field at
  // each field's offset, and every meta of a dump is decoded several times in a comparison.
  DRIFTSCOPE_TRY(check_axis_names(info, base));
  return check_encoding(info, base);
}

}  // namespace

Result<void> decode_tensor_meta_into(std::span<const std::byte> meta, uint64_t base, TensorInfo& out,
                                     std::string* name_out) {
  bool name_read = false;
  // The name is copied out only on failure: the scan of a million records would copy every one.
  if (auto ok = decode_meta_into(meta, base, out, name_read); !ok) {
    if (name_out && name_read) *name_out = out.name;
    return ok;
  }
  return {};
}

Result<TensorInfo> decode_tensor_meta(std::span<const std::byte> meta, uint64_t base, std::string* name_out) {
  TensorInfo info;
  DRIFTSCOPE_TRY(decode_tensor_meta_into(meta, base, info, name_out));
  return info;
}

Result<std::string> encode_header(const KeyValues& metadata, uint64_t salt) {
  if (metadata.size() > limits::kMaxMetadataEntries)
    return err(Errc::limit_exceeded, kNoOffset, fmt::format("{} metadata entries, allowed at most {}",
                                                            metadata.size(), limits::kMaxMetadataEntries));
  std::string meta;
  std::unordered_set<std::string_view> keys;
  for (const auto& [k, v] : metadata) {
    DRIFTSCOPE_TRY(check_string("metadata key", k, 1, limits::kMaxKeyLength, kNoOffset));
    DRIFTSCOPE_TRY(check_string("metadata value", v, 0, limits::kMaxValueLength, kNoOffset));
    if (!keys.insert(k).second)
      return err(Errc::duplicate_key, kNoOffset, fmt::format("metadata key '{}' appears twice", k));
    put_le<uint32_t>(meta, static_cast<uint32_t>(k.size()));
    meta += k;
    put_le<uint32_t>(meta, static_cast<uint32_t>(v.size()));
    meta += v;
  }
  uint64_t header_length = align64(kFixedHeaderSize + meta.size());
  if (header_length > limits::kMaxHeaderLength)
    return err(Errc::limit_exceeded, kNoOffset, fmt::format("header would be {} bytes, allowed at most {}",
                                                            header_length, limits::kMaxHeaderLength));
  std::string h(kFixedHeaderSize, '\0');
  auto* p = reinterpret_cast<std::byte*>(h.data());
  for (size_t i = 0; i < kFileMagic.size(); ++i) p[i] = std::byte{kFileMagic[i]};
  store_le<uint16_t>(p + hdr::version_major, kVersionMajor);
  store_le<uint16_t>(p + hdr::version_minor, kVersionMinor);
  store_le<uint32_t>(p + hdr::byte_order, kByteOrderMark);
  store_le<uint64_t>(p + hdr::salt, salt);
  store_le<uint32_t>(p + hdr::required, 0);
  store_le<uint32_t>(p + hdr::optional, 0);
  store_le<uint32_t>(p + hdr::header_length, static_cast<uint32_t>(header_length));
  store_le<uint32_t>(p + hdr::metadata_length, static_cast<uint32_t>(meta.size()));
  store_le<uint32_t>(p + hdr::metadata_count, static_cast<uint32_t>(metadata.size()));
  uint32_t crc = crc32(0, p, hdr::crc);
  crc = crc32(crc, meta.data(), meta.size());
  store_le<uint32_t>(p + hdr::crc, crc);
  h += meta;
  h.resize(header_length, '\0');
  return h;
}

// The checks run in the order of docs/format.md §2.1, so that no field is used before the
// check that covers it and every reader reports the same first failure.
Result<FileHeader> decode_header(std::span<const std::byte> file) {
  if (file.size() < kFixedHeaderSize)
    return err(Errc::truncated_header, file.size(),
               fmt::format("file is {} bytes, shorter than the 64-byte header", file.size()));
  const std::byte* p = file.data();
  if (std::memcmp(p, kFileMagic.data(), kFileMagic.size()) != 0)
    return err(Errc::bad_magic, 0, "not a TDUMP file (magic is not 89 54 44 55 4D 50 0D 0A)");
  FileHeader h;
  h.version_major = load_le<uint16_t>(p + hdr::version_major);
  h.version_minor = load_le<uint16_t>(p + hdr::version_minor);
  if (h.version_major != kVersionMajor)
    return err(Errc::unsupported_version, hdr::version_major,
               fmt::format("format version {}.{} is not supported (this reader reads 1.x)", h.version_major, h.version_minor));
  uint32_t bom = load_le<uint32_t>(p + hdr::byte_order);
  if (bom != kByteOrderMark)
    return err(Errc::bad_byte_order, hdr::byte_order,
               fmt::format("byte_order is 0x{:08x}, expected 0x01020304 (little-endian)", bom));
  h.salt = load_le<uint64_t>(p + hdr::salt);
  h.required_features = load_le<uint32_t>(p + hdr::required);
  h.optional_features = load_le<uint32_t>(p + hdr::optional);
  h.header_length = load_le<uint32_t>(p + hdr::header_length);
  uint32_t meta_len = load_le<uint32_t>(p + hdr::metadata_length);
  uint32_t meta_count = load_le<uint32_t>(p + hdr::metadata_count);
  if (h.header_length > limits::kMaxHeaderLength)
    return err(Errc::limit_exceeded, hdr::header_length,
               fmt::format("header_length is {}, allowed at most {}", h.header_length, limits::kMaxHeaderLength));
  if (h.header_length != align64(uint64_t{kFixedHeaderSize} + meta_len))
    return err(Errc::length_mismatch, hdr::header_length,
               fmt::format("header_length {} does not match metadata_length {} (expected align64(64 + {}))",
                           h.header_length, meta_len, meta_len));
  if (file.size() < h.header_length)
    return err(Errc::truncated_header, file.size(),
               fmt::format("file is {} bytes, shorter than its {}-byte header", file.size(), h.header_length));
  uint32_t crc = crc32(0, p, hdr::crc);
  crc = crc32(crc, p + kFixedHeaderSize, meta_len);
  uint32_t stored = load_le<uint32_t>(p + hdr::crc);
  if (crc != stored)
    return err(Errc::bad_header_checksum, hdr::crc,
               fmt::format("header_crc is 0x{:08x}, computed 0x{:08x}", stored, crc));
  uint32_t unknown = h.required_features & ~kKnownRequiredFeatures;
  if (unknown)
    return err(Errc::unsupported_feature, hdr::required,
               fmt::format("file requires feature bits 0x{:08x} that this reader does not know", unknown));
  if (meta_count > limits::kMaxMetadataEntries)
    return err(Errc::limit_exceeded, hdr::metadata_count,
               fmt::format("metadata_count is {}, allowed at most {}", meta_count, limits::kMaxMetadataEntries));
  for (size_t i = hdr::reserved; i < hdr::crc; ++i)
    if (p[i] != std::byte{0}) return err(Errc::reserved_nonzero, i, "reserved header byte is not zero");
  for (uint64_t i = kFixedHeaderSize + meta_len; i < h.header_length; ++i)
    if (p[i] != std::byte{0}) return err(Errc::nonzero_padding, i, "header padding byte is not zero");
  Cursor c(file.subspan(kFixedHeaderSize, meta_len), kFixedHeaderSize);
  std::unordered_set<std::string_view> keys;
  for (uint32_t i = 0; i < meta_count; ++i) {
    // Every failure inside an entry is reported at the entry's start (docs/format.md §4).
    const uint64_t off = c.off();
    auto entry = [&]() -> Result<void> {
      DS_GET(klen, uint32_t, c, "metadata key_length");
      if (klen == 0 || klen > limits::kMaxKeyLength)
        return err(Errc::limit_exceeded, off, fmt::format("metadata key_length is {}, allowed 1..{}", klen, limits::kMaxKeyLength));
      auto k = c.bytes(klen, "metadata key");
      if (!k) return std::move(k).error();
      DS_GET(vlen, uint32_t, c, "metadata value_length");
      if (vlen > limits::kMaxValueLength)
        return err(Errc::limit_exceeded, off, fmt::format("metadata value_length is {}, allowed 0..{}", vlen, limits::kMaxValueLength));
      auto v = c.bytes(vlen, "metadata value");
      if (!v) return std::move(v).error();
      if (!valid_utf8(*k) || !valid_utf8(*v))
        return err(Errc::bad_utf8, off, fmt::format("metadata entry {} is not valid UTF-8", i));
      if (!keys.insert(*k).second)
        return err(Errc::duplicate_key, off, fmt::format("metadata key '{}' appears twice", *k));
      h.metadata.emplace_back(std::string(*k), std::string(*v));
      return {};
    };
    if (auto ok = entry(); !ok) {
      Error e = std::move(ok).error();
      return make_error(e.code, fmt::format("metadata entry {}: {}", i, strip_offset(e)), off);
    }
  }
  if (c.remaining() != 0)
    return err(Errc::length_mismatch, c.off(), fmt::format("metadata block has {} bytes after its last entry", c.remaining()));
  return h;
}

std::string encode_summary_payload(const Summary& s) {
  std::string out;
  out.reserve(kSummaryFixedSize + 4 * s.projection.size());
  const TensorStats& t = s.stats;
  put_le<uint64_t>(out, t.count);
  put_le<uint64_t>(out, t.nan_count);
  put_le<uint64_t>(out, t.posinf_count);
  put_le<uint64_t>(out, t.neginf_count);
  put_le<uint64_t>(out, t.zero_count);
  put_le<double>(out, t.min);
  put_le<double>(out, t.max);
  put_le<double>(out, t.mean);
  put_le<double>(out, t.std);
  put_le<double>(out, t.l2_norm);
  put_le<uint64_t>(out, s.projection_seed);
  put_le<uint32_t>(out, static_cast<uint32_t>(s.projection.size()));
  put_le<uint32_t>(out, s.projection_kind);
  out.append(16, '\0');
  for (float f : s.projection) put_le<float>(out, f);
  return out;
}

Result<void> validate_summary(const Summary& s, uint64_t numel) {
  if (s.projection.size() > limits::kMaxProjectionDim)
    return err(Errc::limit_exceeded, kNoOffset, fmt::format("projection_dim is {}, allowed at most {}",
                                                            s.projection.size(), limits::kMaxProjectionDim));
  if (s.projection_kind != 1)
    return err(Errc::bad_enum, kNoOffset, fmt::format("projection_kind is {}, allowed 1", s.projection_kind));
  // The reader's §3.6 value rules, so a writer never produces a record a reader refuses (§5).
  // An overflowing shape is left to the shape rule, which reports it as shape_overflow.
  const TensorStats& t = s.stats;
  if (numel != ~uint64_t{0} && t.count != numel)
    return err(Errc::bad_value, kNoOffset, fmt::format("summary counts {} elements, its shape has {}", t.count, numel));
  auto counted = checked_add(t.nan_count, t.posinf_count);
  if (counted) counted = checked_add(*counted, t.neginf_count);
  if (counted) counted = checked_add(*counted, t.zero_count);
  if (!counted || *counted > t.count)
    return err(Errc::bad_value, kNoOffset, "summary nan, inf and zero counts add up to more than count");
  return {};
}

Result<Summary> decode_summary_payload(std::span<const std::byte> payload, uint64_t base, uint64_t numel) {
  if (payload.size() < kSummaryFixedSize)
    return err(Errc::length_mismatch, base, fmt::format("summary payload is {} bytes, at least 112 expected", payload.size()));
  const std::byte* p = payload.data();
  Summary s;
  TensorStats& t = s.stats;
  t.count = load_le<uint64_t>(p + 0);
  t.nan_count = load_le<uint64_t>(p + 8);
  t.posinf_count = load_le<uint64_t>(p + 16);
  t.neginf_count = load_le<uint64_t>(p + 24);
  t.zero_count = load_le<uint64_t>(p + 32);
  t.min = load_le<double>(p + 40);
  t.max = load_le<double>(p + 48);
  t.mean = load_le<double>(p + 56);
  t.std = load_le<double>(p + 64);
  t.l2_norm = load_le<double>(p + 72);
  s.projection_seed = load_le<uint64_t>(p + 80);
  uint32_t dim = load_le<uint32_t>(p + 88);
  s.projection_kind = load_le<uint32_t>(p + 92);
  // Checked in the order of docs/format.md §3.6.
  if (dim > limits::kMaxProjectionDim)
    return err(Errc::limit_exceeded, at(base, 88), fmt::format("projection_dim is {}, allowed at most {}", dim, limits::kMaxProjectionDim));
  if (payload.size() != kSummaryFixedSize + 4ull * dim)
    return err(Errc::length_mismatch, base, fmt::format("summary payload is {} bytes, expected 112 + 4 x {}", payload.size(), dim));
  if (s.projection_kind != 1)
    return err(Errc::bad_enum, at(base, 92), fmt::format("projection_kind is {}, allowed 1", s.projection_kind));
  for (size_t i = 96; i < 112; ++i)
    if (p[i] != std::byte{0}) return err(Errc::reserved_nonzero, at(base, i), "reserved summary byte is not zero");
  if (t.count != numel)
    return err(Errc::bad_value, base, fmt::format("summary counts {} elements, its shape has {}", t.count, numel));
  auto counted = checked_add(t.nan_count, t.posinf_count);
  if (counted) counted = checked_add(*counted, t.neginf_count);
  if (counted) counted = checked_add(*counted, t.zero_count);
  if (!counted || *counted > t.count)
    return err(Errc::bad_value, at(base, 8), "summary nan, inf and zero counts add up to more than count");
  s.projection.resize(dim);
  for (uint32_t i = 0; i < dim; ++i) s.projection[i] = load_le<float>(p + kSummaryFixedSize + 4 * i);
  return s;
}

}  // namespace driftscope::detail
