package org.driftscope.tdump;

import java.nio.charset.StandardCharsets;

/**
 * The driftscope hash initialiser (docs/references.md "The hash initialiser"), JDK only, for
 * JVM and Android ports: rebuilds the reference weights and inputs of a model bit for bit the
 * same as the C++ library, the C ABI and the Python package, without shipping a checkpoint.
 *
 * <p>Element {@code i} of the tensor {@code name} is drawn from SplitMix64's stream keyed by the
 * name: output {@code c} is {@code mix64(key + (c + 1) * GOLDEN)}. Only integer arithmetic, exact
 * double steps and one correctly rounded multiplication are used, so the values do not depend on
 * the JVM, the CPU or {@code strictfp}. The golden vectors in tests/vectors/hashinit/ check this
 * file (HashInitTest).
 *
 * <pre>
 *   float[] w = HashInit.fillFloat("encoder.layer.0.attention.self.query.weight",
 *       HashInit.UNIFORM, HashInit.linearStd(384), 0L, 384 * 384);
 * </pre>
 */
public final class HashInit {
  /** U(-a, a) with a = std * sqrt(3): PyTorch's kaiming_uniform and Linear bias shape. */
  public static final int UNIFORM = 0;
  /** Irwin-Hall of four uniforms, centred and scaled: mean 0, the given std, bounded. */
  public static final int NORMAL = 1;

  private static final long GOLDEN = 0x9E3779B97F4A7C15L;
  private static final double TWO_M52 = 0x1p-52;
  private static final double TWO_M51 = 0x1p-51;

  private HashInit() {}

  /** SplitMix64's finaliser. */
  public static long mix64(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** The key of a name given as bytes (spec step 1); seed is read as unsigned 64-bit. */
  public static long nameKey(byte[] name, long seed) {
    long k = mix64(seed + GOLDEN);
    for (byte b : name) k = mix64((k ^ (b & 0xFFL)) + GOLDEN);
    return mix64(k ^ (long) name.length);
  }

  /** The key of a name, hashed as its UTF-8 bytes. */
  public static long nameKey(String name, long seed) {
    return nameKey(name.getBytes(StandardCharsets.UTF_8), seed);
  }

  /** SplitMix64 output number {@code counter} (unsigned) of the stream {@code key}. */
  public static long draw(long key, long counter) {
    return mix64(key + (counter + 1) * GOLDEN);
  }

  /** std * sqrt(3), the scale value() takes; rejects a negative or non-finite std. */
  public static double scaleForStd(double std) {
    if (!(std >= 0) || Double.isInfinite(std)) {
      throw new IllegalArgumentException("std " + std + " must be finite and >= 0");
    }
    return std * Math.sqrt(3.0);
  }

  /** Element {@code index} as the float64 value before the cast to the tensor's dtype. */
  public static double value(long key, long index, int distribution, double scaleA) {
    if (distribution == NORMAL) {
      long s = 0;
      for (long j = 0; j < 4; j++) s += draw(key, 4 * index + j) >>> 13;
      // four 51-bit draws sum below 2^53: exact; centring and scaling by 2^-51 are exact too
      return ((double) (s - (1L << 52)) * TWO_M51) * scaleA;
    }
    if (distribution != UNIFORM) {
      throw new IllegalArgumentException(
          "distribution " + distribution + " is not UNIFORM (0) or NORMAL (1)");
    }
    return ((double) (draw(key, index) >>> 11) * TWO_M52 - 1.0) * scaleA;
  }

  /** Elements first..first+count-1 as doubles. */
  public static double[] fillDouble(
      String name, int distribution, double std, long seed, long first, int count) {
    long key = nameKey(name, seed);
    double a = scaleForStd(std);
    double[] out = new double[count];
    for (int i = 0; i < count; i++) out[i] = value(key, first + i, distribution, a);
    return out;
  }

  /** Elements 0..count-1 as doubles. */
  public static double[] fillDouble(String name, int distribution, double std, long seed, int count) {
    return fillDouble(name, distribution, std, seed, 0, count);
  }

  /** Elements first..first+count-1, each rounded once to the nearest float. */
  public static float[] fillFloat(
      String name, int distribution, double std, long seed, long first, int count) {
    long key = nameKey(name, seed);
    double a = scaleForStd(std);
    float[] out = new float[count];
    for (int i = 0; i < count; i++) out[i] = (float) value(key, first + i, distribution, a);
    return out;
  }

  /** Elements 0..count-1 as floats. */
  public static float[] fillFloat(String name, int distribution, double std, long seed, int count) {
    return fillFloat(name, distribution, std, seed, 0, count);
  }

  /** Integer inputs: low + (draw i mod (high - low)); needs low < high and the width to fit long. */
  public static long[] fillLong(String name, long low, long high, long seed, long first, int count) {
    long width = high - low;
    if (!(low < high) || width <= 0) {
      throw new IllegalArgumentException(
          "integer range [" + low + ", " + high + ") must be non-empty and its width fit int64");
    }
    long key = nameKey(name, seed);
    long[] out = new long[count];
    for (int i = 0; i < count; i++) out[i] = low + Long.remainderUnsigned(draw(key, first + i), width);
    return out;
  }

  /** The native std of a Linear/Conv weight or bias (PyTorch's default init): 1/sqrt(3 fan_in). */
  public static double linearStd(long fanIn) {
    return 1.0 / Math.sqrt(3.0 * (double) fanIn);
  }
}
