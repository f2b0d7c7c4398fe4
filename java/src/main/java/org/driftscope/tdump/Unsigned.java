package org.driftscope.tdump;

/** u64 arithmetic on Java longs (the format's integers are unsigned). */
final class Unsigned {
  private Unsigned() {}

  /** True when the u64 product a × b does not fit in 64 bits. */
  static boolean mulOverflows(long a, long b) {
    if (a == 0 || b == 0) return false;
    long hi = Math.multiplyHigh(a, b);
    // multiplyHigh is signed; this corrects it to the unsigned high word.
    if (a < 0) hi += b;
    if (b < 0) hi += a;
    return hi != 0;
  }

  /** True when the u64 sum a + b does not fit in 64 bits. */
  static boolean addOverflows(long a, long b) {
    return Long.compareUnsigned(a + b, a) < 0;
  }

  static boolean gt(long a, long b) {
    return Long.compareUnsigned(a, b) > 0;
  }

  static boolean lt(long a, long b) {
    return Long.compareUnsigned(a, b) < 0;
  }

  static long align64(long x) {
    return (x + 63) & ~63L;
  }
}
