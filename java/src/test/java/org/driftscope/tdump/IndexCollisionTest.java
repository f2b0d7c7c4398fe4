package org.driftscope.tdump;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Names whose FNV-1a-64 hashes share their low bits put every footer-index entry in one
 * linear-probing cluster (issue 23 item 4). The writer and the reader's index check build the
 * spec's table (§3.4: linear probing in entry order) without walking the probe sequences, and
 * find() uses an in-memory table: the slots must still be the probing loop's, byte for byte, and
 * every name must be found. The growth is shown by bench/bench_index.cpp and bench/java.
 */
public final class IndexCollisionTest {
  static final long PRIME = 0x100000001b3L;

  static long step(long h, String s) {
    for (byte b : s.getBytes(StandardCharsets.UTF_8)) h = (h ^ (b & 0xFF)) * PRIME;
    return h;
  }

  static String block(int c) {
    String a = "abcdefghijklmnopqrstuvwxyz0123456789";
    StringBuilder b = new StringBuilder();
    for (int k = 0; k < 4; ++k, c /= 36) b.append(a.charAt(c % 36));
    return b.toString();
  }

  /** n names whose hashes agree in their low `bits` bits, the low 16 on `home` (a Joux multicollision). */
  static List<String> collidingNames(int n, int bits, long home) {
    long mask = (1L << bits) - 1;
    long state = step(0xcbf29ce484222325L, "adv.");
    int stages = 0;
    while ((1 << stages) < n) ++stages;
    String[][] pairs = new String[stages][];
    for (int st = 0; st < stages; ++st) {
      Map<Long, String> seen = new HashMap<>();
      for (int c = 0;; ++c) {
        String b = block(c);
        long h = step(state, b);
        String prev = seen.putIfAbsent(h & mask, b);
        if (prev != null) {
          pairs[st] = new String[] {prev, b};
          state = h;
          break;
        }
      }
    }
    String tail = null;
    for (int c = 0; tail == null; ++c) {
      if ((step(state, block(c)) & 0xFFFF) == home) tail = block(c);  // 36^4 blocks cover 16 bits
    }
    List<String> names = new ArrayList<>();
    for (int i = 0; i < n; ++i) {
      StringBuilder s = new StringBuilder("adv.");
      for (int st = 0; st < stages; ++st) s.append(pairs[st][(i >> st) & 1]);
      names.add(s.append(tail).toString());
    }
    return names;
  }

  /** The spec's rule as every earlier writer ran it: the oracle for the bytes. */
  static int[] probingLoop(long[] hashes, int slots) {
    int[] t = new int[slots];
    for (int i = 0; i < hashes.length; ++i) {
      int s = (int) (hashes[i] & (slots - 1));
      while (t[s] != 0) s = (s + 1) & (slots - 1);
      t[s] = i + 1;
    }
    return t;
  }

  static int[] slotsOf(byte[] f) {
    ByteBuffer b = ByteBuffer.wrap(f).order(ByteOrder.LITTLE_ENDIAN);
    int end = f.length - 64;
    int index = (int) b.getLong(end + 48);  // END meta: index_offset (§3.5; frames are 48 bytes)
    int n = (int) b.getLong(index + 48);
    int m = (int) b.getLong(index + 48 + 8);
    int at = index + 128 + 24 * n;  // the payload starts at the next multiple of 64 (§8: 0x140 -> 0x1c0)
    int[] t = new int[m];
    for (int s = 0; s < m; ++s) t[s] = b.getInt(at + 4 * s);
    return t;
  }

  static void roundTrip(Path dir, String label, List<String> names, long[] occ) throws Exception {
    Path p = dir.resolve(label + ".tdump");
    try (TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options())) {
      for (int i = 0; i < names.size(); ++i) {
        w.write(new TensorInfo(names.get(i), DType.F32, 1).occurrence(occ[i]), new float[] {i});
      }
    }
    long[] hashes = new long[names.size()];
    for (int i = 0; i < hashes.length; ++i) hashes[i] = Codec.fnv1a64(names.get(i).getBytes(StandardCharsets.UTF_8));
    int[] got = slotsOf(Files.readAllBytes(p));
    Check.that(Arrays.equals(probingLoop(hashes, got.length), got), label + ": slots are the probing loop's");
    for (boolean useIndex : new boolean[] {true, false}) {
      try (TdumpReader r = TdumpReader.open(p, new TdumpReader.Options().useIndex(useIndex))) {
        Check.eq(Integrity.State.CLEAN, r.integrity().state(), label + ": clean");
        Check.eq(0, r.integrity().warnings().size(), label + ": no warnings");
        Check.eq(useIndex, r.integrity().indexUsed(), label + ": index used");
        for (int i = 0; i < names.size(); ++i) {
          Record rec = r.find(names.get(i), occ[i], Role.OUTPUT, 0);
          if (rec != r.records().get(i)) Check.that(false, label + ": find " + names.get(i) + "#" + occ[i]);
        }
        Check.that(r.find(names.get(0) + "x") == null, label + ": absent name");
        Check.that(r.find(names.get(0), 1L << 30, Role.OUTPUT, 0) == null, label + ": absent occurrence");
      }
    }
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("tdump_java_collide_");
    try {
      List<String> names = collidingNames(5000, 24, 16383);  // home: the last of 16384 slots
      for (String s : names) {
        long h = Codec.fnv1a64(s.getBytes(StandardCharsets.UTF_8));
        Check.eq(16383L, h & 0xFFFF, "generator: " + s);
        Check.eq(Codec.fnv1a64(names.get(0).getBytes(StandardCharsets.UTF_8)) & 0xFFFFFF, h & 0xFFFFFF, "generator: " + s);
      }
      roundTrip(dir, "wrap", names, new long[names.size()]);
      List<String> mixed = new ArrayList<>(collidingNames(1500, 24, 100));
      for (String s : collidingNames(1500, 24, 4000)) {
        mixed.add("b." + s);
        mixed.add(s);
        mixed.add("layer." + mixed.size());
      }
      roundTrip(dir, "mixed", mixed, new long[mixed.size()]);
      List<String> same = new ArrayList<>();
      long[] occ = new long[3000];
      for (int i = 0; i < occ.length; ++i) {
        same.add("encoder.block");
        occ[i] = i;
      }
      roundTrip(dir, "occurrences", same, occ);
      Check.done("IndexCollisionTest");
    } finally {
      try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(q -> q.toFile().delete());
      }
    }
  }
}
