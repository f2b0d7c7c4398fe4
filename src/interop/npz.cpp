#include "interop/npz.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>
#include <zlib.h>

#include "driftscope/limits.hpp"
#include "common/bytes.hpp"
#include "common/shape_index.hpp"
#include "interop/quote.hpp"

namespace driftscope::interop {

using detail::checked_add;
using detail::checked_mul;
using detail::load_le;
using detail::put_le;

namespace {

Error npz_error(std::string message, uint64_t offset = kNoOffset) {
  return make_error(Errc::bad_npz, std::move(message), offset);
}

// ---- .npy -----------------------------------------------------------------------------------
// Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//   "\x93NUMPY" major minor, header length (u16 for 1.0, u32 for 2.0/3.0), then a Python dict
//   literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces and '\n'.
// The dict is parsed by a strict grammar, never evaluated.

struct DictParser {
  std::string_view s;
  size_t i = 0;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return i < s.size() && s[i] == c;
  }
  bool string(std::string& out) {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    char q = s[i++];
    size_t start = i;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\') return false;  // numpy's descr strings never need escapes
      ++i;
    }
    if (i >= s.size()) return false;
    out.assign(s.substr(start, i - start));
    ++i;
    return true;
  }
  bool word(std::string_view w) {
    ws();
    if (s.substr(i, w.size()) == w) {
      i += w.size();
      return true;
    }
    return false;
  }
  bool integer(uint64_t& out) {
    ws();
    size_t start = i;
    uint64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      auto m = checked_mul(v, 10);
      if (!m) return false;
      auto a = checked_add(*m, static_cast<uint64_t>(s[i] - '0'));
      if (!a) return false;
      v = *a;
      ++i;
    }
    if (i == start) return false;
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix, as old numpy wrote it
    out = v;
    return true;
  }
};

struct DescrInfo {
  DType dtype;
  bool swap;  // big-endian in the file
};

Result<DescrInfo> parse_descr(const std::string& descr, std::string_view what) {
  auto bad = [&](std::string why) {
    return npz_error(fmt::format("{}: dtype {} {}", what, quote(descr), why));
  };
  if (descr.size() < 2) return bad("is not a numpy type string");
  char order = descr[0];
  std::string_view code = std::string_view(descr).substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return bad("is not a numpy type string");
  if (!code.empty() && code[0] == 'O')
    return npz_error(fmt::format(
        "{}: object array (dtype {}) refused: loading it would unpickle arbitrary Python objects",
        what, quote(descr)));
  struct Row {
    std::string_view code;
    DType dtype;
  };
  static constexpr Row kRows[] = {
      {"f8", DType::f64}, {"f4", DType::f32}, {"f2", DType::f16}, {"i8", DType::i64},
      {"i4", DType::i32}, {"i2", DType::i16}, {"i1", DType::i8},  {"u8", DType::u64},
      {"u4", DType::u32}, {"u2", DType::u16}, {"u1", DType::u8},  {"b1", DType::boolean},
  };
  for (const auto& r : kRows) {
    if (r.code == code) {
      bool swap = order == '>' && dtype_size(r.dtype) > 1;
      return DescrInfo{r.dtype, swap};
    }
  }
  switch (code[0]) {
    case 'c': return bad("(complex) is not supported: TDUMP has no complex dtype");
    case 'U':
    case 'S':
    case 'a': return bad("(string) is not supported: only numeric and bool arrays can be imported");
    case 'V': return bad("(raw void, e.g. ml_dtypes bfloat16) is not supported: save it as float32");
    case 'M':
    case 'm': return bad("(datetime) is not supported");
    default: return bad("is not supported");
  }
}

// Rewrites Fortran-order elements into C order: C-order element (i0..in-1) sits at
// Σ i_k · Π dims[0..k) in Fortran order.
void fortran_to_c(std::span<const std::byte> src, std::span<std::byte> dst,
                  const std::vector<uint64_t>& shape, size_t item) {
  std::vector<uint64_t> fstride(shape.size());
  uint64_t s = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    fstride[k] = s;
    s *= shape[k];
  }
  detail::for_each_strided(shape, fstride, [&](uint64_t e, uint64_t off) {
    std::memcpy(dst.data() + e * item, src.data() + off * item, item);
  });
}

Result<NpyArray> parse_npy_impl(std::span<const std::byte> b, std::string_view what,
                                std::vector<std::byte>* owned) {
  static constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || std::memcmp(b.data(), kMagic, 6) != 0)
    return npz_error(fmt::format("{}: not a .npy array (no \\x93NUMPY magic)", what));
  auto major = static_cast<uint8_t>(b[6]);
  auto minor = static_cast<uint8_t>(b[7]);
  uint64_t header_len = 0, header_start = 0;
  if (major == 1 && minor == 0) {
    header_len = load_le<uint16_t>(b.data() + 8);
    header_start = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (b.size() < 12) return npz_error(fmt::format("{}: .npy header cut short", what));
    header_len = load_le<uint32_t>(b.data() + 8);
    header_start = 12;
  } else {
    return npz_error(fmt::format("{}: .npy format version {}.{} is not supported (1.0, 2.0, 3.0)",
                                 what, major, minor));
  }
  if (header_len > kMaxNpyHeader)
    return npz_error(fmt::format("{}: .npy header of {} bytes exceeds the limit of {}", what,
                                 header_len, kMaxNpyHeader), 8);
  if (header_start + header_len > b.size())
    return npz_error(fmt::format("{}: .npy header of {} bytes runs past the end of the data ({} "
                                 "bytes)", what, header_len, b.size()), 8);
  std::string_view text(reinterpret_cast<const char*>(b.data() + header_start), header_len);

  DictParser p{text};
  std::string descr;
  bool fortran = false;
  std::vector<uint64_t> shape;
  bool have_descr = false, have_order = false, have_shape = false;
  auto syntax = [&](std::string_view why) {
    return npz_error(fmt::format("{}: malformed .npy header ({}) near column {}: {}", what, why,
                                 p.i, quote(text.substr(0, 120))));
  };
  if (!p.eat('{')) return syntax("expected '{'");
  while (!p.eat('}')) {
    std::string key;
    if (!p.string(key)) return syntax("expected a quoted key");
    if (!p.eat(':')) return syntax("expected ':'");
    if (key == "descr") {
      if (have_descr) return syntax("duplicate key 'descr'");
      have_descr = true;
      if (p.peek('[') || p.peek('('))
        return npz_error(
            fmt::format("{}: structured dtype (a record array) is not supported", what));
      if (!p.string(descr)) return syntax("descr is not a string");
    } else if (key == "fortran_order") {
      if (have_order) return syntax("duplicate key 'fortran_order'");
      have_order = true;
      if (p.word("True")) fortran = true;
      else if (p.word("False")) fortran = false;
      else return syntax("fortran_order is not True or False");
    } else if (key == "shape") {
      if (have_shape) return syntax("duplicate key 'shape'");
      have_shape = true;
      if (!p.eat('(')) return syntax("shape is not a tuple");
      while (!p.eat(')')) {
        uint64_t d;
        if (!p.integer(d)) return syntax("shape entry is not a non-negative integer");
        if (shape.size() >= limits::kMaxRank)
          return npz_error(fmt::format("{}: shape has more than {} dimensions, the TDUMP limit",
                                       what, limits::kMaxRank));
        shape.push_back(d);
        if (!p.eat(',')) {
          if (!p.eat(')')) return syntax("expected ',' or ')' in shape");
          break;
        }
      }
    } else {
      return syntax(fmt::format("unexpected key {}", quote(key)));
    }
    if (!p.eat(',')) {
      if (!p.eat('}')) return syntax("expected ',' or '}'");
      break;
    }
  }
  p.ws();
  if (p.i != text.size()) return syntax("trailing characters after the dict");
  if (!have_descr || !have_order || !have_shape)
    return syntax("missing one of 'descr', 'fortran_order', 'shape'");

  auto di = parse_descr(descr, what);
  DRIFTSCOPE_TRY(di);
  size_t item = dtype_size(di->dtype);
  uint64_t numel = 1;
  for (uint64_t d : shape) {
    auto m = checked_mul(numel, d);
    if (!m) return npz_error(fmt::format("{}: shape {} overflows 64 bits", what, fmt_shape(shape)));
    numel = *m;
  }
  auto bytes = checked_mul(numel, item);
  if (!bytes || *bytes > limits::kMaxPayloadLength)
    return npz_error(fmt::format("{}: shape {} of {} is too large", what, fmt_shape(shape),
                                 descr));
  uint64_t data_start = header_start + header_len;
  uint64_t have = b.size() - data_start;
  if (have != *bytes)
    return npz_error(fmt::format("{}: shape {} of {} needs {} data bytes, the array has {}", what,
                                 fmt_shape(shape), descr, *bytes, have),
                     data_start);

  NpyArray a;
  a.dtype = di->dtype;
  a.shape = std::move(shape);
  a.descr = descr;
  std::span<const std::byte> data = b.subspan(data_start);
  bool transpose = fortran && a.shape.size() > 1;
  if (di->swap || transpose) {
    std::vector<std::byte> buf(data.size());
    if (transpose)
      fortran_to_c(data, buf, a.shape, item);
    else
      std::memcpy(buf.data(), data.data(), data.size());
    if (di->swap)
      for (size_t e = 0; e < buf.size(); e += item) std::reverse(buf.begin() + static_cast<std::ptrdiff_t>(e),
                                                                 buf.begin() + static_cast<std::ptrdiff_t>(e + item));
    a.storage = std::move(buf);
    a.data = a.storage;
  } else if (owned) {
    // Keep the inflated bytes and point past the header into them.
    a.storage = std::move(*owned);
    a.data = std::span<const std::byte>(a.storage).subspan(data_start);
  } else {
    a.data = data;
  }
  if (a.dtype == DType::boolean) {
    for (size_t e = 0; e < a.data.size(); ++e) {
      auto v = static_cast<uint8_t>(a.data[e]);
      if (v > 1)
        return npz_error(fmt::format("{}: bool element {} holds byte {}, not 0 or 1", what, e, v));
    }
  }
  return a;
}

}  // namespace

Result<NpyArray> parse_npy(std::span<const std::byte> bytes, std::string_view what) {
  return parse_npy_impl(bytes, what, nullptr);
}

Result<NpyArray> parse_npy(std::vector<std::byte>&& owned, std::string_view what) {
  std::span<const std::byte> view(owned);
  return parse_npy_impl(view, what, &owned);
}

std::string_view npy_descr(DType t) noexcept {
  switch (t) {
    case DType::f64: return "<f8";
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::i64: return "<i8";
    case DType::i32: return "<i4";
    case DType::i16: return "<i2";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::boolean: return "|b1";
    case DType::u16: return "<u2";
    case DType::u32: return "<u4";
    case DType::u64: return "<u8";
    default: return {};
  }
}

std::string npy_header(std::string_view descr, const std::vector<uint64_t>& shape) {
  // shape as Python writes tuples: (2, 3), (5,), ()
  std::string tuple = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) tuple += ", ";
    tuple += std::to_string(shape[i]);
  }
  if (shape.size() == 1) tuple += ',';
  tuple += ')';
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}", descr, tuple);
  dict += ", }";
  // Version 1.0 when the header fits a u16, as numpy does; total length a multiple of 64.
  size_t prefix = 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  bool v2 = total - prefix > 65535;
  if (v2) {
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t hlen = total - prefix;
  dict.append(hlen - dict.size() - 1, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  if (v2) put_le<uint32_t>(out, static_cast<uint32_t>(hlen));
  else put_le<uint16_t>(out, static_cast<uint16_t>(hlen));
  out += dict;
  return out;
}

// ---- zip reading ----------------------------------------------------------------------------------
// Layout: APPNOTE.TXT 6.3 §4.3. Signatures: local 0x04034b50, central 0x02014b50,
// end 0x06054b50, ZIP64 end 0x06064b50, ZIP64 locator 0x07064b50.

namespace {
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr uint64_t kEndSize = 22, kLocatorSize = 20, kEnd64Size = 56, kCentralSize = 46,
                   kLocalSize = 30;
}  // namespace

Result<ZipReader> ZipReader::open(std::span<const std::byte> b) {
  const uint64_t size = b.size();
  if (size < kEndSize)
    return npz_error(fmt::format("not a zip archive: {} bytes is shorter than a zip end record",
                                 size));
  // The end record is the last 22 bytes plus a comment of at most 65535 bytes.
  uint64_t end = kNoOffset;
  uint64_t lowest = size >= kEndSize + 65535 ? size - kEndSize - 65535 : 0;
  for (uint64_t pos = size - kEndSize + 1; pos-- > lowest;) {
    if (load_le<uint32_t>(b.data() + pos) == kEndSig &&
        pos + kEndSize + load_le<uint16_t>(b.data() + pos + 20) == size) {
      end = pos;
      break;
    }
  }
  if (end == kNoOffset) {
    if (size >= 4 && load_le<uint32_t>(b.data()) == kLocalSig)
      return npz_error("zip archive has no end of central directory record (the file is cut "
                       "short or was still being written)");
    return npz_error("not a zip archive (no end of central directory record)");
  }
  const std::byte* e = b.data() + end;
  uint64_t disk = load_le<uint16_t>(e + 4), cd_disk = load_le<uint16_t>(e + 6);
  uint64_t entries_disk = load_le<uint16_t>(e + 8), entries = load_le<uint16_t>(e + 10);
  uint64_t cd_size = load_le<uint32_t>(e + 12), cd_offset = load_le<uint32_t>(e + 16);
  uint64_t cd_limit = end;  // the central directory ends where the end records start

  if (end >= kLocatorSize && load_le<uint32_t>(b.data() + end - kLocatorSize) == kLocator64Sig) {
    const std::byte* l = b.data() + end - kLocatorSize;
    uint64_t e64 = load_le<uint64_t>(l + 8);
    if (load_le<uint32_t>(l + 4) != 0 || load_le<uint32_t>(l + 16) > 1)
      return npz_error("multi-disk zip archives are not supported", end - kLocatorSize);
    if (e64 > end - kLocatorSize || end - kLocatorSize - e64 < kEnd64Size)
      return npz_error(fmt::format("ZIP64 end record offset {} is outside the archive", e64),
                       end - kLocatorSize);
    const std::byte* z = b.data() + e64;
    if (load_le<uint32_t>(z) != kEnd64Sig)
      return npz_error("bad ZIP64 end of central directory signature", e64);
    disk = load_le<uint32_t>(z + 16);
    cd_disk = load_le<uint32_t>(z + 20);
    entries_disk = load_le<uint64_t>(z + 24);
    entries = load_le<uint64_t>(z + 32);
    cd_size = load_le<uint64_t>(z + 40);
    cd_offset = load_le<uint64_t>(z + 48);
    cd_limit = e64;
  }
  if (disk != 0 || cd_disk != 0 || entries_disk != entries)
    return npz_error("multi-disk zip archives are not supported", end);
  auto cd_end = checked_add(cd_offset, cd_size);
  if (!cd_end || *cd_end > cd_limit)
    return npz_error(fmt::format("central directory (offset {}, {} bytes) runs past its end "
                                 "record at {}", cd_offset, cd_size, cd_limit), end);
  // Each entry takes at least 46 bytes: this bounds the allocation below by the file size.
  if (entries > cd_size / kCentralSize)
    return npz_error(fmt::format("zip end record claims {} members in a {}-byte central directory",
                                 entries, cd_size), end);

  ZipReader z;
  z.bytes_ = b;
  z.members_.reserve(entries);
  std::unordered_set<std::string> names;
  uint64_t q = cd_offset;
  for (uint64_t n = 0; n < entries; ++n) {
    if (*cd_end - q < kCentralSize)
      return npz_error(fmt::format("central directory entry {} is cut short", n), q);
    const std::byte* c = b.data() + q;
    if (load_le<uint32_t>(c) != kCentralSig)
      return npz_error(fmt::format("bad signature of central directory entry {}", n), q);
    uint16_t flags = load_le<uint16_t>(c + 8);
    ZipMember m;
    m.method = load_le<uint16_t>(c + 10);
    m.crc32 = load_le<uint32_t>(c + 16);
    m.compressed_size = load_le<uint32_t>(c + 20);
    m.uncompressed_size = load_le<uint32_t>(c + 24);
    uint64_t nlen = load_le<uint16_t>(c + 28), elen = load_le<uint16_t>(c + 30),
             clen = load_le<uint16_t>(c + 32);
    uint64_t start_disk = load_le<uint16_t>(c + 34);
    m.local_offset = load_le<uint32_t>(c + 42);
    if (*cd_end - q - kCentralSize < nlen + elen + clen)
      return npz_error(fmt::format("central directory entry {} runs past the directory", n), q);
    m.name.assign(reinterpret_cast<const char*>(c + kCentralSize), nlen);
    // ZIP64 extended information (APPNOTE 4.5.3): only the fields saturated in the entry.
    const std::byte* x = c + kCentralSize + nlen;
    const std::byte* xend = x + elen;
    while (xend - x >= 4) {
      uint16_t id = load_le<uint16_t>(x), len = load_le<uint16_t>(x + 2);
      if (static_cast<uint64_t>(xend - x - 4) < len)
        return npz_error(fmt::format("member {}: extra field runs past its entry", quote(m.name)), q);
      if (id == 0x0001) {
        const std::byte* f = x + 4;
        const std::byte* fend = f + len;
        auto take = [&](uint64_t& field) -> bool {
          if (fend - f < 8) return false;
          field = load_le<uint64_t>(f);
          f += 8;
          return true;
        };
        if ((m.uncompressed_size == 0xFFFFFFFF && !take(m.uncompressed_size)) ||
            (m.compressed_size == 0xFFFFFFFF && !take(m.compressed_size)) ||
            (m.local_offset == 0xFFFFFFFF && !take(m.local_offset)))
          return npz_error(fmt::format("member {}: ZIP64 extra field too short", quote(m.name)), q);
        if (start_disk == 0xFFFF) start_disk = fend - f >= 4 ? load_le<uint32_t>(f) : 1;
      }
      x += 4 + len;
    }
    if (start_disk != 0) return npz_error("multi-disk zip archives are not supported", q);
    if (flags & 0x0041)
      return npz_error(fmt::format("member {} is encrypted", quote(m.name)), q);
    if (m.method != 0 && m.method != 8)
      return npz_error(fmt::format("member {} uses compression method {}; only stored (0) and "
                                   "deflate (8) are supported", quote(m.name), m.method), q);
    if (!names.insert(m.name).second)
      return npz_error(fmt::format("member {} appears twice in the archive", quote(m.name)), q);

    // The local header must agree with the central entry (else two tools would read two
    // different archives from the same bytes).
    uint64_t o = m.local_offset;
    if (o >= cd_offset || cd_offset - o < kLocalSize)
      return npz_error(fmt::format("member {}: local header offset {} is outside the data area",
                                   quote(m.name), o), q);
    const std::byte* h = b.data() + o;
    if (load_le<uint32_t>(h) != kLocalSig)
      return npz_error(fmt::format("member {}: bad local header signature", quote(m.name)), o);
    uint64_t lnlen = load_le<uint16_t>(h + 26), lelen = load_le<uint16_t>(h + 28);
    if (load_le<uint16_t>(h + 8) != m.method)
      return npz_error(fmt::format("member {}: local header method {} differs from the central "
                                   "directory's {}", quote(m.name), load_le<uint16_t>(h + 8),
                                   m.method), o);
    if (cd_offset - o - kLocalSize < lnlen + lelen ||
        lnlen != nlen || std::memcmp(h + kLocalSize, c + kCentralSize, nlen) != 0)
      return npz_error(fmt::format("member {}: local header name differs from the central "
                                   "directory's", quote(m.name)), o);
    m.data_offset = o + kLocalSize + lnlen + lelen;
    if (m.compressed_size > cd_offset - m.data_offset)
      return npz_error(fmt::format("member {}: {} compressed bytes at offset {} run past the "
                                   "data area", quote(m.name), m.compressed_size, m.data_offset), o);
    if (m.method == 0 && m.compressed_size != m.uncompressed_size)
      return npz_error(fmt::format("member {}: stored member with compressed size {} != size {}",
                                   quote(m.name), m.compressed_size, m.uncompressed_size), q);
    if (m.method == 8) {
      // compressed_size is bounded by the file size here, so the product cannot overflow.
      uint64_t cap = m.compressed_size * kMaxDeflateRatio + 1024;
      if (m.uncompressed_size > cap)
        return npz_error(fmt::format("member {}: claims {} bytes from {} deflated bytes, more "
                                     "than deflate can expand", quote(m.name),
                                     m.uncompressed_size, m.compressed_size), q);
    }
    z.members_.push_back(std::move(m));
    q += kCentralSize + nlen + elen + clen;
  }
  // Members must not overlap: overlapping members are how "zip bombs" multiply their data.
  std::vector<const ZipMember*> by_offset;
  by_offset.reserve(z.members_.size());
  for (const auto& m : z.members_) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ZipMember* a, const ZipMember* c) { return a->local_offset < c->local_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const ZipMember& prev = *by_offset[i - 1];
    if (prev.data_offset + prev.compressed_size > by_offset[i]->local_offset)
      return npz_error(fmt::format("members {} and {} overlap", quote(prev.name),
                                   quote(by_offset[i]->name)), by_offset[i]->local_offset);
  }
  return z;
}

Result<std::span<const std::byte>> ZipReader::read(const ZipMember& m,
                                                   std::vector<std::byte>& out) const {
  std::span<const std::byte> src = bytes_.subspan(m.data_offset, m.compressed_size);
  std::span<const std::byte> result;
  if (m.method == 0) {
    result = src;
  } else {
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
      return make_error(Errc::io_error, "zlib inflateInit2 failed");
    out.clear();
    // Grow with the data that really arrives rather than trusting the claimed size.
    uint64_t cap = std::min<uint64_t>(m.uncompressed_size, uint64_t{16} << 20);
    out.resize(cap);
    uint64_t in_done = 0, produced = 0;
    int rc = Z_OK;
    while (true) {
      if (zs.avail_in == 0 && in_done < src.size()) {
        uint64_t chunk = std::min<uint64_t>(src.size() - in_done, UINT_MAX);
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(src.data() + in_done));
        zs.avail_in = static_cast<uInt>(chunk);
        in_done += chunk;
      }
      if (produced == out.size()) {
        if (out.size() == m.uncompressed_size) {
          // Full: the stream must end now, with no further output.
          std::byte probe[1];
          zs.next_out = reinterpret_cast<Bytef*>(probe);
          zs.avail_out = 1;
          rc = inflate(&zs, Z_NO_FLUSH);
          if (zs.avail_out == 0) {
            inflateEnd(&zs);
            return npz_error(fmt::format("member {}: inflates to more than its declared {} bytes",
                                         quote(m.name), m.uncompressed_size), m.data_offset);
          }
          if (rc == Z_STREAM_END) break;
          if (rc == Z_OK && in_done < src.size()) continue;  // more input to feed first
          std::string msg = zs.msg ? zs.msg : "no end marker";
          inflateEnd(&zs);
          return npz_error(fmt::format("member {}: deflate stream is corrupt or cut short ({})",
                                       quote(m.name), msg), m.data_offset);
        }
        out.resize(std::min<uint64_t>(m.uncompressed_size, out.size() * 2 + 1));
      }
      uint64_t room = std::min<uint64_t>(out.size() - produced, UINT_MAX);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      zs.avail_out = static_cast<uInt>(room);
      rc = inflate(&zs, Z_NO_FLUSH);
      produced += room - zs.avail_out;
      if (rc == Z_STREAM_END) break;
      if (rc != Z_OK && !(rc == Z_BUF_ERROR && zs.avail_out == 0)) {
        std::string msg = zs.msg ? zs.msg : "stream cut short";
        inflateEnd(&zs);
        return npz_error(fmt::format("member {}: deflate stream is corrupt ({})", quote(m.name),
                                     msg), m.data_offset);
      }
      if (zs.avail_in == 0 && in_done == src.size() && zs.avail_out != 0) {
        inflateEnd(&zs);
        return npz_error(fmt::format("member {}: deflate stream is cut short", quote(m.name)),
                         m.data_offset);
      }
    }
    bool trailing = zs.avail_in != 0 || in_done != src.size();
    inflateEnd(&zs);
    if (produced != m.uncompressed_size)
      return npz_error(fmt::format("member {}: inflates to {} bytes, the directory says {}",
                                   quote(m.name), produced, m.uncompressed_size), m.data_offset);
    if (trailing)
      return npz_error(fmt::format("member {}: data continues after the end of its deflate stream",
                                   quote(m.name)), m.data_offset);
    out.resize(produced);
    result = out;
  }
  // zlib's crc32 takes uInt lengths: feed large members in pieces.
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t i = 0; i < result.size();) {
    uint64_t chunk = std::min<uint64_t>(result.size() - i, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(result.data() + i), static_cast<uInt>(chunk));
    i += chunk;
  }
  if (static_cast<uint32_t>(crc) != m.crc32)
    return npz_error(fmt::format("member {}: CRC-32 is 0x{:08x}, the directory says 0x{:08x}",
                                 quote(m.name), static_cast<uint32_t>(crc), m.crc32),
                     m.data_offset);
  return result;
}

// ---- zip writing --------------------------------------------------------------------------------

struct ZipWriter::Impl {
  std::FILE* f = nullptr;
  std::string path;
  bool deflate = false;
  uint64_t offset = 0;  // bytes written so far
  struct Entry {
    std::string name;
    uint64_t local_offset;
    uint64_t csize;
    uint64_t usize;
    uint32_t crc;
    bool zip64;  // sizes in a ZIP64 extra field
  };
  std::vector<Entry> entries;
  bool in_member = false;
  Entry cur{};
  uLong crc = 0;
  z_stream zs{};
  bool zs_live = false;
  std::vector<unsigned char> zbuf;
};

namespace {
// 1980-01-01 00:00 (the DOS epoch): fixed, so the same dump exports to the same bytes.
constexpr uint16_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;
uint16_t name_flags(std::string_view name) {
  for (unsigned char c : name)
    if (c >= 0x80) return 0x0800;  // names are UTF-8 (APPNOTE appendix D)
  return 0;
}
}  // namespace

Result<std::unique_ptr<ZipWriter>> ZipWriter::create(const std::string& path, bool deflate) {
  std::unique_ptr<ZipWriter> w(new ZipWriter());
  w->impl_ = std::make_unique<Impl>();
  w->impl_->f = std::fopen(path.c_str(), "wb");
  if (!w->impl_->f)
    return make_error(Errc::io_error, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  w->impl_->path = path;
  w->impl_->deflate = deflate;
  return w;
}

ZipWriter::~ZipWriter() {
  if (impl_) {
    if (impl_->zs_live) deflateEnd(&impl_->zs);
    if (impl_->f) std::fclose(impl_->f);
  }
}

Result<void> ZipWriter::put(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, impl_->f) != n)
    return make_error(Errc::io_error, fmt::format("cannot write {}: {}", impl_->path, std::strerror(errno)));
  impl_->offset += n;
  return {};
}

Result<void> ZipWriter::begin(std::string_view name, uint64_t size) {
  auto& s = *impl_;
  if (name.find('\0') != std::string_view::npos)
    return make_error(Errc::invalid_argument,
                      fmt::format("member name {} holds a NUL byte, where zip readers cut names",
                                  quote(name)));
  if (name.size() > 0xFFFF)
    return make_error(Errc::invalid_argument,
                      fmt::format("member name of {} bytes exceeds zip's 65535", name.size()));
  s.cur = Impl::Entry{std::string(name), s.offset, 0, size, 0, false};
  // Decide ZIP64 before writing: deflateBound is deflate's worst case for incompressible data.
  uint64_t worst = s.deflate ? size + size / 1000 + 1024 : size;
  s.cur.zip64 = worst >= 0xFFFFFFFFull;
  std::string h;
  put_le<uint32_t>(h, kLocalSig);
  put_le<uint16_t>(h, s.cur.zip64 ? 45 : 20);
  put_le<uint16_t>(h, name_flags(name));
  put_le<uint16_t>(h, s.deflate ? 8 : 0);
  put_le<uint16_t>(h, kDosTime);
  put_le<uint16_t>(h, kDosDate);
  put_le<uint32_t>(h, 0);  // crc, patched in end()
  put_le<uint32_t>(h, s.cur.zip64 ? 0xFFFFFFFF : 0);
  put_le<uint32_t>(h, s.cur.zip64 ? 0xFFFFFFFF : 0);
  put_le<uint16_t>(h, static_cast<uint16_t>(name.size()));
  put_le<uint16_t>(h, s.cur.zip64 ? 20 : 0);
  h += name;
  if (s.cur.zip64) {
    put_le<uint16_t>(h, 0x0001);
    put_le<uint16_t>(h, 16);
    put_le<uint64_t>(h, 0);
    put_le<uint64_t>(h, 0);
  }
  DRIFTSCOPE_TRY(put(h.data(), h.size()));
  s.crc = crc32(0L, Z_NULL, 0);
  if (s.deflate) {
    s.zs = z_stream{};
    // Level 6 and a raw stream (no zlib wrapper), as Python's zipfile.ZIP_DEFLATED writes.
    if (deflateInit2(&s.zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return make_error(Errc::io_error, "zlib deflateInit2 failed");
    s.zs_live = true;
    s.zbuf.resize(1 << 18);
  }
  s.cur.csize = 0;
  s.in_member = true;
  return {};
}

Result<void> ZipWriter::write(std::span<const std::byte> data) {
  auto& s = *impl_;
  for (uint64_t i = 0; i < data.size();) {
    uint64_t chunk = std::min<uint64_t>(data.size() - i, 1u << 30);
    const auto* p = reinterpret_cast<const Bytef*>(data.data() + i);
    s.crc = crc32(s.crc, p, static_cast<uInt>(chunk));
    if (!s.deflate) {
      DRIFTSCOPE_TRY(put(p, chunk));
      s.cur.csize += chunk;
    } else {
      s.zs.next_in = const_cast<Bytef*>(p);
      s.zs.avail_in = static_cast<uInt>(chunk);
      while (s.zs.avail_in != 0) {
        s.zs.next_out = s.zbuf.data();
        s.zs.avail_out = static_cast<uInt>(s.zbuf.size());
        deflate(&s.zs, Z_NO_FLUSH);
        size_t n = s.zbuf.size() - s.zs.avail_out;
        DRIFTSCOPE_TRY(put(s.zbuf.data(), n));
        s.cur.csize += n;
      }
    }
    i += chunk;
  }
  return {};
}

Result<void> ZipWriter::end() {
  auto& s = *impl_;
  if (s.deflate) {
    int rc;
    do {
      s.zs.next_out = s.zbuf.data();
      s.zs.avail_out = static_cast<uInt>(s.zbuf.size());
      rc = deflate(&s.zs, Z_FINISH);
      size_t n = s.zbuf.size() - s.zs.avail_out;
      DRIFTSCOPE_TRY(put(s.zbuf.data(), n));
      s.cur.csize += n;
    } while (rc == Z_OK);
    deflateEnd(&s.zs);
    s.zs_live = false;
    if (rc != Z_STREAM_END) return make_error(Errc::io_error, "zlib deflate failed");
  }
  s.cur.crc = static_cast<uint32_t>(s.crc);
  // Patch crc and sizes into the local header (the file is seekable: we created it).
  std::string patch;
  put_le<uint32_t>(patch, s.cur.crc);
  if (!s.cur.zip64) {
    put_le<uint32_t>(patch, static_cast<uint32_t>(s.cur.csize));
    put_le<uint32_t>(patch, static_cast<uint32_t>(s.cur.usize));
  }
  auto seek_write = [&](uint64_t at, const std::string& bytes) -> Result<void> {
    if (fseeko(s.f, static_cast<off_t>(at), SEEK_SET) != 0 ||
        std::fwrite(bytes.data(), 1, bytes.size(), s.f) != bytes.size())
      return make_error(Errc::io_error, fmt::format("cannot write {}: {}", s.path, std::strerror(errno)));
    return {};
  };
  DRIFTSCOPE_TRY(seek_write(s.cur.local_offset + 14, patch));
  if (s.cur.zip64) {
    std::string sizes;
    put_le<uint64_t>(sizes, s.cur.usize);
    put_le<uint64_t>(sizes, s.cur.csize);
    DRIFTSCOPE_TRY(seek_write(s.cur.local_offset + kLocalSize + s.cur.name.size() + 4, sizes));
  }
  if (fseeko(s.f, static_cast<off_t>(s.offset), SEEK_SET) != 0)
    return make_error(Errc::io_error, fmt::format("cannot seek {}: {}", s.path, std::strerror(errno)));
  s.entries.push_back(std::move(s.cur));
  s.in_member = false;
  return {};
}

Result<void> ZipWriter::finish() {
  auto& s = *impl_;
  uint64_t cd_offset = s.offset;
  for (const auto& e : s.entries) {
    bool off64 = e.local_offset >= 0xFFFFFFFFull;
    std::string x;
    if (e.zip64 || off64) {
      std::string body;
      if (e.zip64) {
        put_le<uint64_t>(body, e.usize);
        put_le<uint64_t>(body, e.csize);
      }
      if (off64) put_le<uint64_t>(body, e.local_offset);
      put_le<uint16_t>(x, 0x0001);
      put_le<uint16_t>(x, static_cast<uint16_t>(body.size()));
      x += body;
    }
    uint16_t needed = (e.zip64 || off64) ? 45 : 20;
    std::string h;
    put_le<uint32_t>(h, kCentralSig);
    put_le<uint16_t>(h, static_cast<uint16_t>((3 << 8) | needed));  // made by: Unix
    put_le<uint16_t>(h, needed);
    put_le<uint16_t>(h, name_flags(e.name));
    put_le<uint16_t>(h, s.deflate ? 8 : 0);
    put_le<uint16_t>(h, kDosTime);
    put_le<uint16_t>(h, kDosDate);
    put_le<uint32_t>(h, e.crc);
    put_le<uint32_t>(h, e.zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.csize));
    put_le<uint32_t>(h, e.zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.usize));
    put_le<uint16_t>(h, static_cast<uint16_t>(e.name.size()));
    put_le<uint16_t>(h, static_cast<uint16_t>(x.size()));
    put_le<uint16_t>(h, 0);  // comment
    put_le<uint16_t>(h, 0);  // disk
    put_le<uint16_t>(h, 0);  // internal attributes
    put_le<uint32_t>(h, 0100644u << 16);  // rw-r--r-- regular file
    put_le<uint32_t>(h, off64 ? 0xFFFFFFFF : static_cast<uint32_t>(e.local_offset));
    h += e.name;
    h += x;
    DRIFTSCOPE_TRY(put(h.data(), h.size()));
  }
  uint64_t cd_size = s.offset - cd_offset;
  uint64_t count = s.entries.size();
  bool z64 = count >= 0xFFFF || cd_size >= 0xFFFFFFFFull || cd_offset >= 0xFFFFFFFFull;
  std::string t;
  if (z64) {
    uint64_t e64 = s.offset;
    put_le<uint32_t>(t, kEnd64Sig);
    put_le<uint64_t>(t, kEnd64Size - 12);
    put_le<uint16_t>(t, (3 << 8) | 45);
    put_le<uint16_t>(t, 45);
    put_le<uint32_t>(t, 0);
    put_le<uint32_t>(t, 0);
    put_le<uint64_t>(t, count);
    put_le<uint64_t>(t, count);
    put_le<uint64_t>(t, cd_size);
    put_le<uint64_t>(t, cd_offset);
    put_le<uint32_t>(t, kLocator64Sig);
    put_le<uint32_t>(t, 0);
    put_le<uint64_t>(t, e64);
    put_le<uint32_t>(t, 1);
  }
  put_le<uint32_t>(t, kEndSig);
  put_le<uint16_t>(t, 0);
  put_le<uint16_t>(t, 0);
  put_le<uint16_t>(t, z64 ? 0xFFFF : static_cast<uint16_t>(count));
  put_le<uint16_t>(t, z64 ? 0xFFFF : static_cast<uint16_t>(count));
  put_le<uint32_t>(t, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(cd_size));
  put_le<uint32_t>(t, z64 ? 0xFFFFFFFF : static_cast<uint32_t>(cd_offset));
  put_le<uint16_t>(t, 0);
  DRIFTSCOPE_TRY(put(t.data(), t.size()));
  std::FILE* f = s.f;
  s.f = nullptr;
  if (std::fflush(f) != 0 || std::fclose(f) != 0)
    return make_error(Errc::io_error, fmt::format("cannot write {}: {}", s.path, std::strerror(errno)));
  return {};
}

}  // namespace driftscope::interop
