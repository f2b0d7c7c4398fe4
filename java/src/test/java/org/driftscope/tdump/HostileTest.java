package org.driftscope.tdump;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Hostile files: every golden vector mutated many ways (bit flips, bytes, truncation, extreme
 * values in frame and meta fields). The reader must return or throw TdumpException — never
 * another exception, never an allocation beyond the format's limits (the JVM runs this with its
 * default heap; an unbounded allocation from a 2^63 length field would fail with OutOfMemoryError).
 */
public final class HostileTest {
  public static void main(String[] args) throws Exception {
    List<byte[]> seeds = new ArrayList<>();
    try (Stream<Path> s = Files.walk(Check.root().resolve("tests/vectors"))) {
      for (Path p : s.filter(x -> x.toString().endsWith(".tdump")).sorted().collect(Collectors.toList())) {
        seeds.add(Files.readAllBytes(p));
      }
    }
    long seed = args.length > 0 ? Long.parseLong(args[0]) : 20261201L;
    Random rng = new Random(seed);
    long[] extremes = {0, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, 1L << 48, (1L << 48) + 1, 1L << 20, (1L << 20) + 1, 0xFFFFFFFFL, 63, 64, 65};
    int outcomes = 0;
    int failures = 0;
    for (int iter = 0; iter < 6000; ++iter) {
      byte[] b = seeds.get(rng.nextInt(seeds.size())).clone();
      int kind = rng.nextInt(5);
      if (b.length == 0) continue;
      ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
      switch (kind) {
        case 0:
          for (int k = 0; k < 1 + rng.nextInt(4); ++k) b[rng.nextInt(b.length)] ^= (byte) (1 << rng.nextInt(8));
          break;
        case 1:
          b[rng.nextInt(b.length)] = (byte) rng.nextInt(256);
          break;
        case 2:
          b = java.util.Arrays.copyOf(b, rng.nextInt(b.length));
          break;
        case 3: {
          int at = rng.nextInt(Math.max(1, b.length - 8)) & ~7;
          if (at + 8 <= b.length) bb.putLong(at, extremes[rng.nextInt(extremes.length)]);
          break;
        }
        default: {
          int at = rng.nextInt(Math.max(1, b.length - 4)) & ~3;
          if (at + 4 <= b.length) bb.putInt(at, (int) extremes[rng.nextInt(extremes.length)]);
          break;
        }
      }
      for (TdumpReader.Options o : new TdumpReader.Options[] {new TdumpReader.Options(),
          new TdumpReader.Options().verify(TdumpReader.Verify.FRAMES).resync(true)}) {
        try {
          TdumpReader r = TdumpReader.fromBytes(ByteBuffer.wrap(b), o);
          for (Record rec : r.records()) {
            rec.payload();
            r.find(rec.name(), rec.info().occurrence(), rec.info().role(), rec.info().roleIndex());
            if (rec.kind() == Record.Kind.TENSOR && rec.payloadLength() < (1 << 20)) Values.dequantize(rec);
          }
          outcomes++;
        } catch (TdumpException e) {
          failures++;
          Check.that(e.getMessage() != null && !e.getMessage().contains("\n"), "one-line message: " + e);
        } catch (Throwable t) {
          throw new AssertionError("seed " + seed + " iteration " + iter + ": " + t, t);
        }
      }
    }
    Check.that(outcomes > 0 && failures > 0, "both outcomes happened");
    Check.done("HostileTest (" + outcomes + " read, " + failures + " refused)");
  }
}
