#include "util.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/text.hpp"

static_assert(std::endian::native == std::endian::little,
              "the CLI's archive codecs read little-endian fields with memcpy");

namespace driftscope::cli {

namespace {
void diagnostic(std::string_view kind, std::string_view message) {
  std::string line = fmt::format("driftscope: {}: {}\n", kind, printable(message));
  std::fwrite(line.data(), 1, line.size(), stderr);
}
}  // namespace

int fail(std::string_view message) {
  diagnostic("error", message);
  return kExitTrouble;
}

int fail(std::string_view path, const Error& error) {
  // The reader already names the file in its messages; say it once.
  std::string_view msg = error.message;
  if (msg.size() > path.size() + 2 && msg.substr(0, path.size()) == path &&
      msg.substr(path.size(), 2) == ": ")
    msg.remove_prefix(path.size() + 2);
  return fail(fmt::format("{}: {}: {}", path, errc_name(error.code), msg));
}

void warn(std::string_view message) { diagnostic("warning", message); }

void note(std::string_view message) { diagnostic("note", message); }

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// ---- output -------------------------------------------------------------------------------------

// ---- formatting ---------------------------------------------------------------------------------

std::string fmt_num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  return fmt::format("{:.6g}", v);
}

namespace {
// Explicit mantissa bits and smallest normal exponent of the narrow float dtypes.
struct NarrowFloat {
  int mantissa_bits;
  int min_exponent;
};
std::optional<NarrowFloat> narrow_float(DType t) {
  switch (t) {
    case DType::f16: return NarrowFloat{10, -14};
    case DType::bf16: return NarrowFloat{7, -126};
    case DType::f8e4m3fn: return NarrowFloat{3, -6};
    case DType::f8e5m2: return NarrowFloat{2, -14};
    default: return std::nullopt;
  }
}
}  // namespace

std::string fmt_exact(double v, DType t) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return fmt_num(v);
  char buf[64];
  auto nf = narrow_float(t);
  if (!nf) {
    auto r = t == DType::f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                             : std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
  // The decimals that round to v: between the midpoints to its neighbours, a midpoint itself
  // when v's last mantissa bit is even. All of these are exact in double (<= 11 significant bits
  // plus two), and so is every comparison below.
  const double a = std::fabs(v);
  const int e = std::max(std::ilogb(a), nf->min_exponent);
  const double ulp = std::ldexp(1.0, e - nf->mantissa_bits);
  const bool binade_start = a == std::ldexp(1.0, e) && e > nf->min_exponent;
  const double lo = a - (binade_start ? ulp / 4 : ulp / 2), hi = a + ulp / 2;
  const bool even = std::fmod(a / ulp, 2.0) == 0;
  auto inside = [&](double d) { return (d > lo && d < hi) || (even && (d == lo || d == hi)); };
  for (int p = 1; p <= 17; ++p) {
    // The nearest p-digit decimal M x 10^k, then its neighbours M-1 and M+1: near a power of two
    // the interval is lopsided and the nearest may miss where a neighbour fits.
    std::string sci = fmt::format("{:.{}e}", a, p - 1);
    size_t epos = sci.find('e');
    std::string digits;
    for (size_t i = 0; i < epos; ++i)
      if (sci[i] != '.') digits += sci[i];
    const int k = std::stoi(sci.substr(epos + 1)) - (p - 1);
    const uint64_t m = std::stoull(digits);
    for (uint64_t cand : {m, m - 1, m + 1}) {
      if (cand == 0) continue;
      std::string dec = fmt::format("{}e{}", cand, k);
      double d = 0;
      std::from_chars(dec.data(), dec.data() + dec.size(), d);
      if (inside(d)) return fmt::format("{:.{}g}", std::signbit(v) ? -d : d, p);
    }
  }
  return fmt::format("{:.17g}", v);  // not reached: 17 digits always fit
}

std::string fmt_count(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string fmt_bytes(uint64_t v) {
  std::string s = fmt::format("{} bytes", fmt_count(v));
  if (v >= 1024) {
    static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double x = static_cast<double>(v) / 1024.0;
    size_t u = 0;
    while (x >= 1024.0 && u + 1 < std::size(kUnits)) {
      x /= 1024.0;
      ++u;
    }
    s += fmt::format(" ({:.1f} {})", x, kUnits[u]);
  }
  return s;
}

std::string fmt_shape(const std::vector<uint64_t>& shape, bool compact) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += compact ? "," : ", ";
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

std::string fmt_role(Role role, uint16_t index, bool always_index) {
  std::string s(role_name(role));
  if (index != 0 || always_index) s += fmt::format(":{}", index);
  return s;
}

std::string fmt_hex64(uint64_t v) { return fmt::format("0x{:016x}", v); }

std::string quote(std::string_view s) { return "'" + printable(s) + "'"; }

size_t terminal_width() {
  if (const char* c = std::getenv("COLUMNS"); c && *c) {
    char* end = nullptr;
    unsigned long v = std::strtoul(c, &end, 10);
    if (end && *end == '\0' && v > 0 && v < 100000) return v;
  }
  struct winsize ws {};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 0;
}

size_t display_width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

namespace {
// Byte offset of the `cp`-th code point of s (s.size() when past the end).
size_t cp_offset(std::string_view s, size_t cp) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cp) return i;
      ++n;
    }
  }
  return s.size();
}
}  // namespace

std::string elide_middle(std::string_view s, size_t width) {
  size_t w = display_width(s);
  if (w <= width) return std::string(s);
  if (width == 0) return {};
  if (width == 1) return "…";
  // Keep more of the tail: the last components of a module path say which layer it is.
  size_t keep = width - 1;
  size_t head = keep / 3;
  size_t tail = keep - head;
  std::string out(s.substr(0, cp_offset(s, head)));
  out += "…";
  out += s.substr(cp_offset(s, w - tail));
  return out;
}

// ---- records ------------------------------------------------------------------------------------

Result<TensorStats> record_stats(const Record& r) {
  if (r.kind == RecordKind::summary) {
    if (!r.summary()) return make_error(Errc::bad_value, "summary record without decoded summary");
    return r.summary()->stats;
  }
  return compute_stats(r.info, r.payload);
}

std::string_view kind_name(RecordKind k) {
  switch (k) {
    case RecordKind::tensor: return "tensor";
    case RecordKind::summary: return "summary";
    case RecordKind::index: return "index";
    case RecordKind::end: return "end";
  }
  return "unknown";
}

// Says on stderr what a damaged file lost, so listings of it are not mistaken for complete.
void warn_damage(const std::string& file, const Reader& r) {
  const Integrity& in = r.integrity();
  if (in.state == FileState::cut)
    warn(fmt::format("{} is cut at offset {} ({} bytes discarded); using the {} complete records "
                     "before it", file, in.cut_offset, in.discarded_bytes, r.records().size()));
  else if (in.state == FileState::corrupt)
    warn(fmt::format("{} is corrupt ({}); using its {} valid records", file,
                     corruption_text(in), r.records().size()));
}

std::string corruption_text(const Integrity& in) {
  if (!in.corruption) return "no corruption";
  std::string s(errc_name(in.corruption->code));
  if (!in.corrupt_name.empty()) s += fmt::format(" in tensor {}", quote(in.corrupt_name));
  return s + ": " + in.corruption->message;
}

}  // namespace driftscope::cli
