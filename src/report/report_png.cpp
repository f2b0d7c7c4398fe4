// The error-growth plot as a PNG (for papers and issues): a small RGB rasteriser (rectangles,
// lines, discs, a 3x5 pixel font drawn at 2x) and a PNG writer (RFC 2083: IHDR, one zlib IDAT of
// filter-0 scanlines, IEND; CRC-32 and deflate from zlib, which the library links already). The
// layout follows the HTML report's chart: log-scale relative L2 error per pair in execution order,
// lanes for new NaN/Inf (top), exact (0) and pairs without an error (bottom).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "compare/internal.hpp"
#include "driftscope/report.hpp"

namespace driftscope {
namespace {

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kGrid{221, 225, 230}, kText{70, 76, 84}, kLine{184, 192, 204},
    kFirst{210, 31, 60};

Rgb status_colour(PairStatus s) {
  switch (s) {
    case PairStatus::pass: return {46, 157, 74};
    case PairStatus::fail: return {224, 123, 0};
    case PairStatus::silent_failure: return {210, 31, 60};
    default: return {138, 143, 152};
  }
}

// 3x5 glyphs, one row per 3 bits (MSB left); unknown characters are blank.
uint16_t glyph(char c) {
  auto g = [](int a, int b, int c2, int d, int e) { return static_cast<uint16_t>(a << 12 | b << 9 | c2 << 6 | d << 3 | e); };
  switch (c) {
    case '0': return g(7, 5, 5, 5, 7); case '1': return g(2, 6, 2, 2, 7); case '2': return g(7, 1, 7, 4, 7);
    case '3': return g(7, 1, 7, 1, 7); case '4': return g(5, 5, 7, 1, 1); case '5': return g(7, 4, 7, 1, 7);
    case '6': return g(7, 4, 7, 5, 7); case '7': return g(7, 1, 2, 2, 2); case '8': return g(7, 5, 7, 5, 7);
    case '9': return g(7, 5, 7, 1, 7); case '-': return g(0, 0, 7, 0, 0); case '.': return g(0, 0, 0, 0, 2);
    case '/': return g(1, 1, 2, 4, 4); case '+': return g(0, 2, 7, 2, 0); case ':': return g(0, 2, 0, 2, 0);
    case 'a': return g(0, 3, 5, 5, 3); case 'b': return g(4, 6, 5, 5, 6); case 'c': return g(0, 3, 4, 4, 3);
    case 'd': return g(1, 3, 5, 5, 3); case 'e': return g(2, 5, 7, 4, 3); case 'f': return g(3, 4, 6, 4, 4);
    case 'g': return g(3, 5, 3, 1, 6); case 'h': return g(4, 6, 5, 5, 5); case 'i': return g(2, 0, 2, 2, 2);
    case 'j': return g(1, 0, 1, 5, 2); case 'k': return g(4, 5, 6, 5, 5); case 'l': return g(6, 2, 2, 2, 7);
    case 'm': return g(0, 7, 7, 5, 5); case 'n': return g(0, 6, 5, 5, 5); case 'o': return g(0, 2, 5, 5, 2);
    case 'p': return g(0, 6, 5, 6, 4); case 'q': return g(0, 3, 5, 3, 1); case 'r': return g(0, 5, 6, 4, 4);
    case 's': return g(0, 3, 6, 3, 6); case 't': return g(2, 7, 2, 2, 3); case 'u': return g(0, 5, 5, 5, 3);
    case 'v': return g(0, 5, 5, 5, 2); case 'w': return g(0, 5, 5, 7, 7); case 'x': return g(0, 5, 2, 2, 5);
    case 'y': return g(5, 5, 3, 1, 6); case 'z': return g(0, 7, 3, 6, 7); case 'N': return g(5, 7, 7, 5, 5);
    case 'I': return g(7, 2, 2, 2, 7); case 'L': return g(4, 4, 4, 4, 7);
    default: return 0;
  }
}

class Canvas {
 public:
  Canvas(unsigned w, unsigned h) : w_(w), h_(h), px_(size_t{w} * h, kWhite) {}
  void set(long x, long y, Rgb c) {
    if (x >= 0 && y >= 0 && x < long(w_) && y < long(h_)) px_[size_t(y) * w_ + size_t(x)] = c;
  }
  void rect(long x, long y, long w, long h, Rgb c) {
    for (long j = y; j < y + h; ++j)
      for (long i = x; i < x + w; ++i) set(i, j, c);
  }
  void hline(long x0, long x1, long y, Rgb c, int dash = 0) {
    for (long x = x0; x <= x1; ++x)
      if (!dash || (x / dash) % 2 == 0) set(x, y, c);
  }
  void vline(long x, long y0, long y1, Rgb c, int dash = 0) {
    for (long y = y0; y <= y1; ++y)
      if (!dash || (y / dash) % 2 == 0) set(x, y, c);
  }
  void line(double x0, double y0, double x1, double y1, Rgb c) {
    const int steps = std::max(1, int(std::ceil(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0)))));
    for (int s = 0; s <= steps; ++s) {
      double t = double(s) / steps;
      set(std::lround(x0 + (x1 - x0) * t), std::lround(y0 + (y1 - y0) * t), c);
    }
  }
  void disc(double cx, double cy, double r, Rgb c) {
    for (long y = long(cy - r - 1); y <= long(cy + r + 1); ++y)
      for (long x = long(cx - r - 1); x <= long(cx + r + 1); ++x)
        if ((double(x) - cx) * (double(x) - cx) + (double(y) - cy) * (double(y) - cy) <= r * r) set(x, y, c);
  }
  // Text at scale 2: 6x10 pixels per glyph, 8 per advance. align: 0 left, 1 centre, 2 right.
  void text(long x, long y, std::string_view s, Rgb c, int align = 0) {
    const long width = long(s.size()) * 8 - 2;
    if (align == 1) x -= width / 2;
    if (align == 2) x -= width;
    for (char ch : s) {
      uint16_t g = glyph(ch);
      for (int row = 0; row < 5; ++row)
        for (int col = 0; col < 3; ++col)
          if (g >> ((4 - row) * 3 + (2 - col)) & 1) rect(x + col * 2, y + row * 2, 2, 2, c);
      x += 8;
    }
  }
  unsigned width() const { return w_; }
  unsigned height() const { return h_; }
  const std::vector<Rgb>& pixels() const { return px_; }

 private:
  unsigned w_, h_;
  std::vector<Rgb> px_;
};

void put_u32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s += static_cast<char>((v >> (8 * k)) & 0xff);
}

void chunk(std::string& out, const char type[4], std::string_view data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out += body;
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  put_u32(out, static_cast<uint32_t>(crc));
}

Result<std::string> encode_png(const Canvas& c) {
  std::string raw;
  raw.reserve(size_t(c.height()) * (1 + 3 * size_t(c.width())));
  for (unsigned y = 0; y < c.height(); ++y) {
    raw += '\0';  // filter type 0 (None) for every scanline
    for (unsigned x = 0; x < c.width(); ++x) {
      const Rgb& p = c.pixels()[size_t(y) * c.width() + x];
      raw += static_cast<char>(p.r);
      raw += static_cast<char>(p.g);
      raw += static_cast<char>(p.b);
    }
  }
  uLongf len = compressBound(static_cast<uLong>(raw.size()));
  std::string z(len, '\0');
  if (compress2(reinterpret_cast<Bytef*>(z.data()), &len, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 9) != Z_OK)
    return Error{Errc::io_error, "PNG: deflate failed"};
  z.resize(len);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_u32(ihdr, c.width());
  put_u32(ihdr, c.height());
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, truecolour, deflate, filter 0, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", "");
  return out;
}

}  // namespace

Result<std::string> report_to_png(const Report& report, const PlotOptions& options) {
  if (options.width < 320 || options.width > 4096 || options.height < 200 || options.height > 4096)
    return Error{Errc::invalid_argument,
                 fmt::format("plot size {}x{}, allowed 320 .. 4096 x 200 .. 4096", options.width, options.height)};
  Canvas c(options.width, options.height);
  const long W = options.width, H = options.height;
  const long L = 70, Rm = 16, T = 34, B = 40, lane = 14;
  const long yTop = T + 6, yZero = H - B - lane, yNone = H - B - 2;
  const double y0 = double(yTop + lane + 4), y1 = double(yZero - lane);
  const auto& P = report.pairs;
  const size_t n = P.size();

  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (const auto& p : P)
    if (p.compared && std::isfinite(p.error) && p.error > 0) {
      lo = std::min(lo, std::log10(p.error));
      hi = std::max(hi, std::log10(p.error));
    }
  int dlo = std::isfinite(lo) ? int(std::floor(lo)) : -8, dhi = std::isfinite(hi) ? int(std::ceil(hi)) : 0;
  if (dhi <= dlo) dhi = dlo + 1;
  auto x = [&](size_t i) { return n <= 1 ? double(L + W - Rm) / 2.0 : double(L) + double(i) / double(n - 1) * double(W - L - Rm); };
  auto y = [&](double e) { return y1 - (std::log10(e) - dlo) / (dhi - dlo) * (y1 - y0); };

  const int step = std::max(1, (dhi - dlo + 7) / 8);
  for (int d = dlo; d <= dhi; d += step) {
    long yy = std::lround(y(std::pow(10.0, d)));
    c.hline(L, W - Rm, yy, kGrid);
    c.text(L - 8, yy - 5, fmt::format("1e{}", d), kText, 2);
  }
  for (auto [yy, label] : {std::pair<long, const char*>{yTop, "NaN/Inf"}, {yZero, "0"}, {yNone, "n/a"}}) {
    c.hline(L, W - Rm, yy, kGrid, 3);
    c.text(L - 8, yy - 5, label, kText, 2);
  }
  // x ticks: about eight, at round pair numbers
  if (n > 1) {
    double raw = double(n - 1) / 8;
    double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
    size_t tick = size_t(std::max(1.0, (raw / mag >= 5 ? 5 : raw / mag >= 2 ? 2 : 1) * mag));
    for (size_t i = 0; i < n; i += tick) c.text(std::lround(x(i)), H - B + 6, std::to_string(i), kText, 1);
  }
  c.text((L + W - Rm) / 2, H - 14, "pair in execution order", kText, 1);
  c.text(L, 8, "relative L2 error", kText);
  // legend, top right
  long lx = W - Rm;
  for (PairStatus s : {PairStatus::silent_failure, PairStatus::fail, PairStatus::pass}) {
    if (!report.count(s)) continue;
    std::string name(status_name(s));
    for (auto& ch : name) if (ch == '_') ch = ' ';
    lx -= long(name.size()) * 8 + 22;
    c.disc(double(lx + 5), 13, 4, status_colour(s));
    c.text(lx + 13, 8, name, kText);
  }
  if (report.first_divergence) {
    long fx = std::lround(x(*report.first_divergence));
    c.vline(fx, T, H - B, kFirst, 4);
    const char* label = "first divergence";
    long tx = fx + 6 + 16 * 8 > W - Rm ? fx - 6 - 16 * 8 : fx + 6;
    c.text(tx, T - 2, label, kFirst);
  }
  // the line through compared pairs, then one disc per pair
  bool have = false;
  double px = 0, py = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& p = P[i];
    if (!p.compared || !std::isfinite(p.error) || p.error <= 0) continue;
    double xx = x(i), yy = y(p.error);
    if (have) c.line(px, py, xx, yy, kLine);
    px = xx;
    py = yy;
    have = true;
  }
  const double r = n > 400 ? 2.0 : 3.0;
  for (size_t i = 0; i < n; ++i) {
    const auto& p = P[i];
    double yy = !p.compared ? double(yNone) : !std::isfinite(p.error) ? double(yTop) : p.error <= 0 ? double(yZero) : y(p.error);
    c.disc(x(i), yy, report.first_divergence == i ? r + 2 : r, status_colour(p.status));
  }
  return encode_png(c);
}

}  // namespace driftscope
