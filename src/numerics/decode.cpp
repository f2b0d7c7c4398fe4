// decode(): payload bytes -> f64/f32 values for every dtype and encoding of docs/format.md §3.3.
#include "driftscope/decode.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "common/bytes.hpp"
#include "numerics/decode_plan.hpp"
#include "numerics/decode_simd.hpp"

namespace driftscope::numerics {

namespace {

__extension__ typedef __int128 i128;

constexpr bool kLittle = std::endian::native == std::endian::little;

std::string shape_string(const std::vector<uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

std::string tensor_label(const TensorInfo& info) {
  return fmt::format("tensor '{}' ({} {})", info.name, dtype_name(info.dtype),
                     shape_string(info.shape));
}

// Every fp8 value, built once: 256 exact doubles are cheaper to index than to recompute.
struct Fp8Tables {
  std::array<double, 256> e4m3fn;
  std::array<double, 256> e5m2;
  Fp8Tables() noexcept {
    for (unsigned b = 0; b < 256; ++b) {
      e4m3fn[b] = f8e4m3fn_to_double(static_cast<uint8_t>(b));
      e5m2[b] = f8e5m2_to_double(static_cast<uint8_t>(b));
    }
  }
};
const Fp8Tables& fp8_tables() noexcept {
  static const Fp8Tables tables;
  return tables;
}

// Calls f(T{}) with T the C++ type of an integer dtype.
template <class F>
void visit_int(DType t, F&& f) {
  switch (t) {
    case DType::i64: f(int64_t{}); break;
    case DType::i32: f(int32_t{}); break;
    case DType::i16: f(int16_t{}); break;
    case DType::i8: f(int8_t{}); break;
    case DType::u8: f(uint8_t{}); break;
    case DType::u16: f(uint16_t{}); break;
    case DType::u32: f(uint32_t{}); break;
    case DType::u64: f(uint64_t{}); break;
    default: break;
  }
}

template <class Q, class Out>
void convert_ints(const std::byte* src, size_t n, Out* out) noexcept {
  // int64/uint64 beyond 2^53 (2^24 for float) round to nearest: a single rounding.
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(detail::load_le<Q>(src + i * sizeof(Q)));
}

// value = scale * (q - zero_point), computed in double (docs/format.md §3.3.2).
template <class Q, class Out>
void dequantize(const std::byte* src, size_t n, double scale, int64_t zp, Out* out) noexcept {
  constexpr int64_t kExactZp = int64_t{1} << 52;
  if constexpr (sizeof(Q) <= 4) {
    if (zp >= -kExactZp && zp <= kExactZp) {
      // |q| <= 2^32 and |zp| <= 2^52: both are exact doubles and so is their difference
      // (< 2^53), so this equals the integer formula and vectorises.
      const double z = static_cast<double>(zp);
      for (size_t i = 0; i < n; ++i) {
        const double q = static_cast<double>(detail::load_le<Q>(src + i * sizeof(Q)));
        out[i] = static_cast<Out>(scale * (q - z));
      }
      return;
    }
  }
  // 64-bit q, or a huge zero point: q - zp needs 65 bits; the difference is exact in 128 bits
  // and rounded once to double.
  for (size_t i = 0; i < n; ++i) {
    const i128 d = static_cast<i128>(detail::load_le<Q>(src + i * sizeof(Q))) - zp;
    out[i] = static_cast<Out>(scale * static_cast<double>(d));
  }
}

template <class Out>
Result<void> decode_raw(const DecodePlan& p, uint64_t first, size_t n, Out* out) {
  const std::byte* src = p.data + first * p.elem_size;
  constexpr bool kDouble = std::is_same_v<Out, double>;
  switch (p.dtype) {
    case DType::f64:
      if constexpr (kDouble && kLittle) {
        if (n) std::memcpy(out, src, n * 8);
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(detail::load_le<double>(src + 8 * i));
      }
      return {};
    case DType::f32:
      if constexpr (kLittle) {
        if constexpr (kDouble) {
          widen_f32_to_f64(src, n, out);
        } else if (n) {
          std::memcpy(out, src, n * 4);
        }
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(detail::load_le<float>(src + 4 * i));
      }
      return {};
    case DType::f16:
      if constexpr (kLittle) {
        if constexpr (kDouble) widen_f16_to_f64(src, n, out);
        else widen_f16_to_f32(src, n, out);
      } else {
        for (size_t i = 0; i < n; ++i)
          out[i] = static_cast<Out>(f16_to_double(detail::load_le<uint16_t>(src + 2 * i)));
      }
      return {};
    case DType::bf16:
      if constexpr (kLittle) {
        if constexpr (kDouble) widen_bf16_to_f64(src, n, out);
        else widen_bf16_to_f32(src, n, out);
      } else {
        for (size_t i = 0; i < n; ++i)
          out[i] = static_cast<Out>(bf16_to_double(detail::load_le<uint16_t>(src + 2 * i)));
      }
      return {};
    case DType::f8e4m3fn:
    case DType::f8e5m2: {
      const auto& table =
          p.dtype == DType::f8e4m3fn ? fp8_tables().e4m3fn : fp8_tables().e5m2;
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<Out>(table[std::to_integer<uint8_t>(src[i])]);
      return {};
    }
    case DType::boolean:
      for (size_t i = 0; i < n; ++i) {
        const auto b = std::to_integer<uint8_t>(src[i]);
        if (b > 1)
          return make_error(Errc::bad_value,
                            fmt::format("bool element {} is byte 0x{:02x}; only 0x00 and 0x01 are "
                                        "allowed (docs/format.md §3.3.1)",
                                        first + i, b));
        out[i] = static_cast<Out>(b);
      }
      return {};
    default:
      visit_int(p.dtype, [&](auto tag) { convert_ints<decltype(tag)>(src, n, out); });
      return {};
  }
}

template <class Out>
Result<void> decode_range_impl(const DecodePlan& p, uint64_t first, size_t n, Out* out) {
  const auto end = detail::checked_add(first, n);
  if (!end || *end > p.numel)
    return make_error(Errc::invalid_argument,
                      fmt::format("decode range [{}, {}+{}) is outside the tensor's {} elements",
                                  first, first, n, p.numel));
  if (n == 0) return {};
  if (p.encoding == EncodingKind::raw) return decode_raw(p, first, n, out);

  const std::byte* src = p.data + first * p.elem_size;
  visit_int(p.dtype, [&](auto tag) {
    using Q = decltype(tag);
    if (p.encoding == EncodingKind::affine_tensor) {
      dequantize<Q>(src, n, p.scales[0], p.zero_points[0], out);
      return;
    }
    if (p.inner == 1) {
      // Channels on the last axis: the channel advances with every element.
      uint64_t c = first % p.channels;
      for (size_t k = 0; k < n; ++k) {
        dequantize<Q>(src + k * sizeof(Q), 1, p.scales[c], p.zero_points[c], out + k);
        if (++c == p.channels) c = 0;
      }
      return;
    }
    // Per channel: walk runs of consecutive elements that share a channel (length `inner`,
    // the product of the dims after the axis), so the inner loop has fixed parameters.
    uint64_t i = first;
    size_t done = 0;
    while (done < n) {
      const uint64_t c = (i / p.inner) % p.channels;
      const uint64_t run = std::min<uint64_t>(p.inner - i % p.inner, n - done);
      dequantize<Q>(src + done * sizeof(Q), static_cast<size_t>(run), p.scales[c],
                    p.zero_points[c], out + done);
      done += static_cast<size_t>(run);
      i += run;
    }
  });
  return {};
}

}  // namespace

Result<DecodePlan> make_decode_plan(const TensorInfo& info, std::span<const std::byte> payload) {
  const auto code = static_cast<uint16_t>(info.dtype);
  if (!dtype_valid(code))
    return make_error(Errc::bad_dtype,
                      fmt::format("tensor '{}': dtype code {} is not defined (docs/format.md "
                                  "§3.3.1 allows 1..15)",
                                  info.name, code));
  DecodePlan p;
  p.dtype = info.dtype;
  p.elem_size = dtype_size(info.dtype);
  p.data = payload.data();
  uint64_t numel = 1;
  for (uint64_t d : info.shape) {
    const auto m = detail::checked_mul(numel, d);
    if (!m)
      return make_error(Errc::shape_overflow,
                        fmt::format("{}: element count overflows u64", tensor_label(info)));
    numel = *m;
  }
  const auto bytes = detail::checked_mul(numel, p.elem_size);
  if (!bytes)
    return make_error(Errc::shape_overflow,
                      fmt::format("{}: byte size overflows u64", tensor_label(info)));
  if (payload.size() != *bytes)
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: payload is {} bytes, the shape needs {}", tensor_label(info),
                                  payload.size(), *bytes));
  p.numel = numel;

  const Encoding& enc = info.encoding;
  p.encoding = enc.kind;
  switch (enc.kind) {
    case EncodingKind::raw:
      if (!enc.scales.empty() || !enc.zero_points.empty())
        return make_error(Errc::bad_encoding,
                          fmt::format("{}: raw encoding carries {} scales and {} zero points",
                                      tensor_label(info), enc.scales.size(),
                                      enc.zero_points.size()));
      return p;
    case EncodingKind::affine_tensor:
    case EncodingKind::affine_channel:
      break;
    default:
      return make_error(Errc::bad_encoding,
                        fmt::format("{}: encoding {} is not defined (docs/format.md §3.3.2)",
                                    tensor_label(info), static_cast<unsigned>(enc.kind)));
  }
  if (!dtype_is_integer(info.dtype))
    return make_error(Errc::bad_encoding,
                      fmt::format("{}: affine encoding needs an integer dtype", tensor_label(info)));
  uint64_t want = 1;
  if (enc.kind == EncodingKind::affine_channel) {
    if (enc.axis >= info.shape.size())
      return make_error(Errc::bad_encoding,
                        fmt::format("{}: per-channel axis {} is not below rank {}",
                                    tensor_label(info), enc.axis, info.shape.size()));
    want = info.shape[enc.axis];
    p.channels = want;
    p.inner = 1;
    for (size_t k = enc.axis + 1; k < info.shape.size(); ++k) p.inner *= info.shape[k];
    // A zero dim elsewhere makes numel 0 and inner possibly 0; no element is decoded then.
    if (p.inner == 0) p.inner = 1;
    if (p.channels == 0) p.channels = 1;
  }
  if (enc.scales.size() != want || enc.zero_points.size() != want)
    return make_error(Errc::bad_encoding,
                      fmt::format("{}: affine encoding has {} scales and {} zero points, "
                                  "expected {} of each",
                                  tensor_label(info), enc.scales.size(), enc.zero_points.size(),
                                  want));
  for (size_t k = 0; k < enc.scales.size(); ++k)
    if (!std::isfinite(enc.scales[k]))
      return make_error(Errc::bad_value,
                        fmt::format("{}: scale {} is {}; scales must be finite (docs/format.md "
                                    "§3.3.2)",
                                    tensor_label(info), k, enc.scales[k]));
  p.scales = enc.scales.data();
  p.zero_points = enc.zero_points.data();
  return p;
}

Result<void> decode_range(const DecodePlan& plan, uint64_t first, size_t n, double* out) {
  return decode_range_impl(plan, first, n, out);
}
Result<void> decode_range(const DecodePlan& plan, uint64_t first, size_t n, float* out) {
  return decode_range_impl(plan, first, n, out);
}

}  // namespace driftscope::numerics

namespace driftscope {

Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<double> out) {
  auto plan = numerics::make_decode_plan(info, payload);
  if (!plan) return std::move(plan).error();
  return numerics::decode_range(*plan, first, out.size(), out.data());
}

Result<void> decode(const TensorInfo& info, std::span<const std::byte> payload, uint64_t first,
                    std::span<float> out) {
  auto plan = numerics::make_decode_plan(info, payload);
  if (!plan) return std::move(plan).error();
  return numerics::decode_range(*plan, first, out.size(), out.data());
}

}  // namespace driftscope
