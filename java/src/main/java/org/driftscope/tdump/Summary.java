package org.driftscope.tdump;

/**
 * A SUMMARY record's payload (docs/format.md §3.6, light mode): statistics of the decoded values
 * and a CountSketch projection instead of the values. Fields are public, as in a C struct.
 */
public final class Summary {
  public long count;
  public long nanCount;
  public long posinfCount;
  public long neginfCount;
  public long zeroCount;
  /** Over the finite elements; NaN when there is none. */
  public double min = Double.NaN;
  public double max = Double.NaN;
  public double mean = Double.NaN;
  /** Population standard deviation of the finite elements. */
  public double std = Double.NaN;
  /** √(Σ x²) over the finite elements, 0 when there is none. */
  public double l2Norm;
  public long projectionSeed;
  /** 1 = CountSketch hashed with SplitMix64 (docs/light-mode.md §2). */
  public int projectionKind = 1;
  /** At most 4096 values. */
  public float[] projection = new float[0];

  /** splitmix64 of docs/format.md §3.6. */
  public static long splitmix64(long v) {
    long z = v + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /**
   * Computes a summary of decoded values as §3.6 defines it: counts, min, max and the projection
   * bit for bit; mean, std (two passes) and l2_norm in plain binary64 sums, which agree with the
   * C++ writer's chunked sums (docs/light-mode.md §1) to about 1e-12 relative.
   */
  public static Summary of(double[] x, long seed, int projectionDim) {
    Summary s = new Summary();
    s.count = x.length;
    s.projectionSeed = seed;
    double[] p = new double[projectionDim];
    long finite = 0;
    double sum = 0;
    double lo = Double.POSITIVE_INFINITY;
    double hi = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < x.length; ++i) {
      double v = x[i];
      if (Double.isNaN(v)) {
        s.nanCount++;
        continue;
      }
      if (Double.isInfinite(v)) {
        if (v > 0) s.posinfCount++;
        else s.neginfCount++;
        continue;
      }
      if (v == 0) s.zeroCount++;
      finite++;
      sum += v;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
      if (projectionDim > 0) {
        long h = splitmix64(seed + i);
        int b = (int) Long.remainderUnsigned(h >>> 32, projectionDim);
        p[b] += (h & 1) == 0 ? v : -v;
      }
    }
    double sq = 0;
    double dev = 0;
    if (finite > 0) {
      s.min = lo;
      s.max = hi;
      s.mean = sum / finite;
      for (double v : x) {
        if (Double.isFinite(v)) {
          sq += v * v;
          dev += (v - s.mean) * (v - s.mean);
        }
      }
      s.std = Math.sqrt(dev / finite);
    }
    s.l2Norm = Math.sqrt(sq);
    s.projection = new float[projectionDim];
    for (int b = 0; b < projectionDim; ++b) s.projection[b] = (float) p[b];
    return s;
  }
}
