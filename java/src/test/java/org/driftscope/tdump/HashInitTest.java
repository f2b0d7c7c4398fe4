package org.driftscope.tdump;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * HashInit against the shared golden vectors (tests/vectors/hashinit/golden.json, also checked by
 * the C++, C ABI and Python tests). Run with the repository root (or java/) as working directory,
 * or pass the path of golden.json as the first argument. Throws on the first failure.
 */
public final class HashInitTest {
  private static int checks = 0;

  public static void main(String[] args) throws Exception {
    String json = new String(Files.readAllBytes(golden(args)), StandardCharsets.UTF_8);
    splitMix64(json);
    values(json);
    digests(json);
    integers(json);
    secondBuildIsIdentical();
    badArguments();
    System.out.println("HashInitTest: " + checks + " checks passed");
  }

  private static Path golden(String[] args) {
    if (args.length > 0) return Paths.get(args[0]);
    for (String p : new String[] {"tests/vectors/hashinit/golden.json",
        "../tests/vectors/hashinit/golden.json"}) {
      if (Files.isRegularFile(Paths.get(p))) return Paths.get(p);
    }
    throw new IllegalStateException("golden.json not found; pass its path as the first argument");
  }

  private static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
    checks++;
  }

  private static long hex(String s) {
    return Long.parseUnsignedLong(s, 16);
  }

  /** The JSON objects of one array member, as raw text (the file is generated: flat objects). */
  private static List<String> objects(String json, String member) {
    int start = json.indexOf("\"" + member + "\": [");
    check(start >= 0, "golden.json has no " + member);
    int depth = 0;
    int open = -1;
    List<String> out = new ArrayList<>();
    for (int i = json.indexOf('[', start) + 1; i < json.length(); i++) {
      char c = json.charAt(i);
      if (c == '{') {
        if (depth++ == 0) open = i;
      } else if (c == '}') {
        if (--depth == 0) out.add(json.substring(open, i + 1));
      } else if (c == ']' && depth == 0) {
        break;
      }
    }
    return out;
  }

  private static String str(String obj, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": \"((?:[^\"\\\\]|\\\\.)*)\"").matcher(obj);
    check(m.find(), "no " + key + " in " + obj);
    return unescape(m.group(1));
  }

  private static long num(String obj, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": (-?[0-9]+)").matcher(obj);
    check(m.find(), "no " + key + " in " + obj);
    return Long.parseLong(m.group(1));
  }

  private static List<String> list(String obj, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": \\[([^\\]]*)\\]").matcher(obj);
    check(m.find(), "no " + key + " in " + obj);
    List<String> out = new ArrayList<>();
    for (String s : m.group(1).split(",")) {
      String t = s.trim();
      if (!t.isEmpty()) out.add(t.startsWith("\"") ? t.substring(1, t.length() - 1) : t);
    }
    return out;
  }

  private static String unescape(String s) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' && s.charAt(i + 1) == 'u') {
        b.append((char) Integer.parseInt(s.substring(i + 2, i + 6), 16));
        i += 5;
      } else if (c == '\\') {
        b.append(s.charAt(++i));
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }

  private static int dist(String obj) {
    return str(obj, "distribution").equals("normal") ? HashInit.NORMAL : HashInit.UNIFORM;
  }

  private static void splitMix64(String json) {
    List<String> seed0 = list(json.substring(json.indexOf("\"splitmix64_seed0\"")), "splitmix64_seed0");
    for (int c = 0; c < 3; c++) {
      check(HashInit.draw(0L, c) == hex(seed0.get(c)), "SplitMix64 seed 0 output " + c);
    }
  }

  private static void values(String json) {
    List<String> cases = objects(json, "values");
    check(cases.size() >= 6, "golden values: " + cases.size() + " cases");
    for (String c : cases) {
      String name = str(c, "name");
      long seed = Long.parseUnsignedLong(str(c, "seed"));
      double std = Double.longBitsToDouble(hex(str(c, "std_bits")));
      check(HashInit.nameKey(name, seed) == hex(str(c, "key")), "key of '" + name + "'");
      List<String> b64 = list(c, "float64_bits");
      List<String> b32 = list(c, "float32_bits");
      double[] d = HashInit.fillDouble(name, dist(c), std, seed, b64.size());
      float[] f = HashInit.fillFloat(name, dist(c), std, seed, b32.size());
      for (int i = 0; i < d.length; i++) {
        check(Double.doubleToRawLongBits(d[i]) == hex(b64.get(i)), name + " float64 " + i);
        check(Float.floatToRawIntBits(f[i]) == (int) hex(b32.get(i)), name + " float32 " + i);
      }
    }
  }

  private static void digests(String json) throws Exception {
    for (String c : objects(json, "digests")) {
      String name = str(c, "name");
      float[] f = HashInit.fillFloat(name, dist(c), Double.longBitsToDouble(hex(str(c, "std_bits"))),
          Long.parseUnsignedLong(str(c, "seed")), (int) num(c, "count"));
      check(sha256(f).equals(str(c, "float32_sha256")), "digest of " + name);
    }
  }

  private static void integers(String json) {
    for (String c : objects(json, "integers")) {
      List<String> want = list(c, "values");
      long[] got = HashInit.fillLong(str(c, "name"), num(c, "low"), num(c, "high"),
          Long.parseUnsignedLong(str(c, "seed")), 0, want.size());
      for (int i = 0; i < got.length; i++) {
        check(got[i] == Long.parseLong(want.get(i)), "integers " + str(c, "name") + " " + i);
      }
    }
  }

  private static void secondBuildIsIdentical() throws Exception {
    float[] a = HashInit.fillFloat("layer.weight", HashInit.NORMAL, 0.05, 0L, 4097);
    float[] b = HashInit.fillFloat("layer.weight", HashInit.NORMAL, 0.05, 0L, 4097);
    float[] tail = HashInit.fillFloat("layer.weight", HashInit.NORMAL, 0.05, 0L, 1000, 3097);
    check(sha256(a).equals(sha256(b)), "a second build is bit-identical");
    for (int i = 0; i < tail.length; i++) {
      check(Float.floatToRawIntBits(tail[i]) == Float.floatToRawIntBits(a[1000 + i]), "piece " + i);
    }
    float[] other = HashInit.fillFloat("layer.weight", HashInit.NORMAL, 0.05, 1L, 4097);
    check(!sha256(a).equals(sha256(other)), "another seed gives another tensor");
  }

  private static void badArguments() {
    expectThrows(() -> HashInit.fillFloat("w", HashInit.UNIFORM, -1.0, 0L, 4), "negative std");
    expectThrows(() -> HashInit.fillFloat("w", HashInit.UNIFORM, Double.NaN, 0L, 4), "NaN std");
    expectThrows(() -> HashInit.fillFloat("w", 7, 1.0, 0L, 4), "unknown distribution");
    expectThrows(() -> HashInit.fillLong("w", 5, 5, 0L, 0, 4), "empty range");
    expectThrows(() -> HashInit.fillLong("w", Long.MIN_VALUE, Long.MAX_VALUE, 0L, 0, 4), "wide range");
  }

  private static void expectThrows(Runnable r, String what) {
    try {
      r.run();
    } catch (IllegalArgumentException e) {
      checks++;
      return;
    }
    throw new AssertionError(what + ": no IllegalArgumentException");
  }

  private static String sha256(float[] values) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] bytes = new byte[values.length * 4];
    for (int i = 0; i < values.length; i++) {
      int bits = Float.floatToRawIntBits(values[i]);
      for (int j = 0; j < 4; j++) bytes[4 * i + j] = (byte) (bits >>> (8 * j));  // little-endian
    }
    StringBuilder sb = new StringBuilder();
    for (byte b : md.digest(bytes)) sb.append(String.format("%02x", b));
    return sb.toString();
  }

}
