package org.driftscope.tdump;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Decoding of elements (docs/format.md §3.3.1, §3.3.2): every dtype widened exactly to double
 * (f16, bf16 and both fp8 formats from their bits), and affine dequantisation bit for bit.
 */
public final class Values {
  private Values() {}

  /** IEEE binary16 bits to double, exactly. */
  public static double f16(int bits) {
    int sign = (bits >> 15) & 1;
    int e = (bits >> 10) & 0x1F;
    int m = bits & 0x3FF;
    double v;
    if (e == 0x1F) v = m == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
    else if (e == 0) v = Math.scalb((double) m, -24);
    else v = Math.scalb((double) (0x400 | m), e - 25);
    return sign == 1 ? -v : v;
  }

  /** bfloat16 bits (the upper half of a binary32) to double, exactly. */
  public static double bf16(int bits) {
    return Float.intBitsToFloat((bits & 0xFFFF) << 16);
  }

  /** OCP FP8 E4M3FN bits to double (no infinities; S.1111.111 is NaN). */
  public static double f8e4m3fn(int bits) {
    return fp8(bits & 0xFF, 4, 7, true);
  }

  /** OCP FP8 E5M2 bits to double (IEEE-like, with infinities). */
  public static double f8e5m2(int bits) {
    return fp8(bits & 0xFF, 5, 15, false);
  }

  private static double fp8(int bits, int expBits, int bias, boolean finiteOnly) {
    int manBits = 7 - expBits;
    double sign = (bits >> 7) != 0 ? -1.0 : 1.0;
    int e = (bits >> manBits) & ((1 << expBits) - 1);
    int m = bits & ((1 << manBits) - 1);
    int top = (1 << expBits) - 1;
    if (finiteOnly && e == top && m == (1 << manBits) - 1) return Double.NaN;
    if (!finiteOnly && e == top) return m == 0 ? sign * Double.POSITIVE_INFINITY : Double.NaN;
    if (e == 0) return sign * Math.scalb((double) m, 1 - bias - manBits);
    return sign * Math.scalb((double) ((1 << manBits) + m), e - bias - manBits);
  }

  /** u64 to double, rounded to nearest. */
  static double u64ToDouble(long v) {
    if (v >= 0) return v;
    // Halve with the low bit kept sticky, convert, double: one rounding, as C's (double)uint64.
    return ((v >>> 1) | (v & 1)) * 2.0;
  }

  /** Element i of a payload as the raw integer bits (integers, bool, and float bit patterns). */
  private static long raw(ByteBuffer p, DType t, long i) {
    int at = (int) (i * t.size());
    switch (t.size()) {
      case 1: return p.get(at);
      case 2: return p.getShort(at);
      case 4: return p.getInt(at);
      default: return p.getLong(at);
    }
  }

  /**
   * The elements of a TENSOR record as doubles, row-major (integers rounded to nearest; for
   * affine encodings the stored integers, not the dequantised values — see {@link #dequantize}).
   */
  public static double[] decode(Record r) throws TdumpException {
    if (r.kind() != Record.Kind.TENSOR) {
      throw TdumpException.make(ErrorCode.INVALID_ARGUMENT, "'" + r.name() + "' is a summary: it has no values");
    }
    return decode(r.payload(), r.info.dtype(), r.info.numel());
  }

  /** Decodes n elements of dtype t from a little-endian buffer (from its position). */
  public static double[] decode(ByteBuffer payload, DType t, long n) throws TdumpException {
    if (n < 0 || n > Integer.MAX_VALUE - 8 || payload.remaining() < n * t.size()) {
      throw TdumpException.make(ErrorCode.INVALID_ARGUMENT, n + " elements of " + t + " do not fit this buffer or a Java array");
    }
    ByteBuffer p = payload.slice().order(ByteOrder.LITTLE_ENDIAN);
    double[] out = new double[(int) n];
    for (int i = 0; i < n; ++i) {
      long v = raw(p, t, i);
      switch (t) {
        case F64: out[i] = Double.longBitsToDouble(v); break;
        case F32: out[i] = Float.intBitsToFloat((int) v); break;
        case F16: out[i] = f16((int) v & 0xFFFF); break;
        case BF16: out[i] = bf16((int) v); break;
        case F8E4M3FN: out[i] = f8e4m3fn((int) v); break;
        case F8E5M2: out[i] = f8e5m2((int) v); break;
        case U8: out[i] = v & 0xFF; break;
        case BOOL: out[i] = v & 0xFF; break;
        case U16: out[i] = v & 0xFFFF; break;
        case U32: out[i] = v & 0xFFFFFFFFL; break;
        case U64: out[i] = u64ToDouble(v); break;
        default: out[i] = v; break;  // signed integers, sign-extended by raw()
      }
    }
    return out;
  }

  /**
   * §3.3.2 exactly: q − zero_point computed without rounding (it may need 65 bits), rounded
   * once to binary64, times the scale. A raw record gives its decoded values.
   */
  public static double[] dequantize(Record r) throws TdumpException {
    TensorInfo info = r.info;
    Encoding e = info.encoding();
    if (e.kind() == Encoding.Kind.RAW) return decode(r);
    long n = info.numel();
    if (n > Integer.MAX_VALUE - 8) throw TdumpException.make(ErrorCode.INVALID_ARGUMENT, n + " elements do not fit a Java array");
    ByteBuffer p = r.payload();
    DType t = info.dtype();
    long[] shape = info.shape();
    long inner = 1;  // elements per step of the channel axis
    long channels = 1;
    if (e.kind() == Encoding.Kind.AFFINE_CHANNEL) {
      for (int k = e.axis() + 1; k < shape.length; ++k) inner *= shape[k];
      channels = shape[e.axis()];
    }
    boolean unsigned = t == DType.U8 || t == DType.U16 || t == DType.U32 || t == DType.U64;
    double[] out = new double[(int) n];
    for (int i = 0; i < n; ++i) {
      long q = raw(p, t, i);
      if (t == DType.U8) q &= 0xFF;
      if (t == DType.U16) q &= 0xFFFF;
      if (t == DType.U32) q &= 0xFFFFFFFFL;
      int c = e.kind() == Encoding.Kind.AFFINE_CHANNEL ? (int) ((i / inner) % channels) : 0;
      long zp = e.zeroPoint(c);
      long d = q - zp;
      // Plain long arithmetic when it cannot overflow (signed operands of opposite-free signs);
      // otherwise the exact 65-bit difference.
      boolean exact = !(unsigned && t == DType.U64 && q < 0) && ((q ^ zp) >= 0 || (d ^ q) >= 0);
      if (exact) {
        out[i] = e.scale(c) * (double) d;
        continue;
      }
      java.math.BigInteger diff = (t == DType.U64 && q < 0 ? new java.math.BigInteger(Long.toUnsignedString(q)) : java.math.BigInteger.valueOf(q))
          .subtract(java.math.BigInteger.valueOf(zp));
      out[i] = e.scale(c) * exactToDouble(diff);
    }
    return out;
  }

  /** A big integer rounded once to binary64, to nearest, ties to even. */
  private static double exactToDouble(java.math.BigInteger v) {
    return v.doubleValue();  // correctly rounded since Java 8 (JDK-7131192)
  }
}
