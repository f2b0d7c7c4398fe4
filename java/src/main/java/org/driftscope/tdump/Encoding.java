package org.driftscope.tdump;

import java.util.Arrays;

/**
 * How integer elements map to real values (docs/format.md §3.3.2): raw, or
 * {@code value = scale × (q − zero_point)} per tensor or per channel along an axis. Immutable.
 */
public final class Encoding {
  /** On-disk encoding codes. */
  public enum Kind {
    RAW, AFFINE_TENSOR, AFFINE_CHANNEL;

    @Override
    public String toString() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  private static final Encoding RAW = new Encoding(Kind.RAW, 0, new double[0], new long[0]);

  private final Kind kind;
  private final int axis;
  private final double[] scales;
  private final long[] zeroPoints;

  private Encoding(Kind kind, int axis, double[] scales, long[] zeroPoints) {
    this.kind = kind;
    this.axis = axis;
    this.scales = scales;
    this.zeroPoints = zeroPoints;
  }

  public static Encoding raw() {
    return RAW;
  }

  public static Encoding affineTensor(double scale, long zeroPoint) {
    return new Encoding(Kind.AFFINE_TENSOR, 0, new double[] {scale}, new long[] {zeroPoint});
  }

  /** Per channel along {@code axis}: one scale and one zero point per index of that axis. */
  public static Encoding affineChannel(int axis, double[] scales, long[] zeroPoints) {
    return new Encoding(Kind.AFFINE_CHANNEL, axis, scales.clone(), zeroPoints.clone());
  }

  public Kind kind() {
    return kind;
  }

  /** The channel axis (affine per channel only, else 0). */
  public int axis() {
    return axis;
  }

  public double[] scales() {
    return scales.clone();
  }

  public long[] zeroPoints() {
    return zeroPoints.clone();
  }

  int count() {
    return scales.length;
  }

  double scale(int i) {
    return scales[i];
  }

  long zeroPoint(int i) {
    return zeroPoints[i];
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Encoding)) return false;
    Encoding e = (Encoding) o;
    return kind == e.kind && axis == e.axis && Arrays.equals(scales, e.scales)
        && Arrays.equals(zeroPoints, e.zeroPoints);
  }

  @Override
  public int hashCode() {
    return kind.hashCode() * 31 + Arrays.hashCode(scales);
  }
}
