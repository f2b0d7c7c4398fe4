package org.driftscope.tdump;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Objects;

/** Assertions for the minimal test runner: each *Test main() fails by throwing. */
final class Check {
  private Check() {}

  static int checks;

  static void that(boolean ok, String what) {
    checks++;
    if (!ok) throw new AssertionError(what);
  }

  static void eq(Object want, Object got, String what) {
    checks++;
    if (!Objects.equals(want, got)) throw new AssertionError(what + ": expected <" + want + "> but got <" + got + ">");
  }

  /** Same value, NaN equal to NaN, and the sign of zero counts. */
  static void same(double want, double got, String what) {
    checks++;
    boolean ok = Double.isNaN(want) ? Double.isNaN(got)
        : want == got && (Double.doubleToRawLongBits(want) < 0) == (Double.doubleToRawLongBits(got) < 0);
    if (!ok) throw new AssertionError(what + ": expected " + want + " but got " + got);
  }

  interface Body {
    void run() throws Exception;
  }

  /** The body must throw a TdumpException with this code; returns it. */
  static TdumpException fails(ErrorCode code, Body b, String what) throws Exception {
    checks++;
    try {
      b.run();
    } catch (TdumpException e) {
      if (e.code() != code) throw new AssertionError(what + ": expected " + code + " but got " + e);
      return e;
    }
    throw new AssertionError(what + ": expected " + code + " but nothing failed");
  }

  /** The repository root (the tests run from it or from java/). */
  static Path root() {
    Path p = Paths.get("").toAbsolutePath();
    for (Path q = p; q != null; q = q.getParent()) {
      if (q.resolve("tests/vectors").toFile().isDirectory()) return q;
    }
    throw new AssertionError("cannot find the repository root from " + p);
  }

  static void done(String name) {
    System.out.println(name + ": " + checks + " checks passed");
  }
}
