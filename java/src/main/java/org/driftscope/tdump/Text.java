package org.driftscope.tdump;

import java.nio.charset.StandardCharsets;

/** UTF-8 rules of docs/format.md §1 and the escaping of src/common/text.cpp. */
final class Text {
  private Text() {}

  /**
   * Length of the valid UTF-8 sequence at b[i] (RFC 3629: no overlong forms, surrogates or code
   * points above U+10FFFF), 0 when there is none; cp[0] receives the code point.
   */
  static int seq(byte[] b, int i, int end, int[] cp) {
    int c = b[i] & 0xFF;
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > end) return 0;
    int v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      int x = b[i + k] & 0xFF;
      if ((x & 0xC0) != 0x80) return 0;
      v = (v << 6) | (x & 0x3F);
    }
    int min = n == 1 ? 0 : n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    cp[0] = v;
    return n;
  }

  static boolean validUtf8(byte[] b, int off, int len) {
    int[] cp = new int[1];
    int end = off + len;
    for (int i = off; i < end; ) {
      if ((b[i] & 0x80) == 0) {
        ++i;
        continue;
      }
      int n = seq(b, i, end, cp);
      if (n == 0) return false;
      i += n;
    }
    return true;
  }

  /** Bytes of a Java string; an unpaired surrogate becomes '?' (writers refuse it first: encodable()). */
  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** True when the string encodes to UTF-8 without loss (no unpaired surrogate). */
  static boolean encodable(String s) {
    for (int i = 0; i < s.length(); ++i) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) return false;
        ++i;
      } else if (Character.isLowSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  static String str(byte[] b, int off, int len) {
    return new String(b, off, len, StandardCharsets.UTF_8);
  }

  private static boolean actsOnTerminal(int cp) {
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F
        || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028
        || cp == 0x2029;
  }

  /**
   * driftscope::printable: control characters and invalid bytes as \xNN, code points that act
   * on a terminal (C1, bidi controls, line separators) as \\uNNNN; everything else kept.
   */
  static String printable(String s) {
    byte[] b = utf8(s);
    StringBuilder out = new StringBuilder(s.length());
    int[] cp = new int[1];
    for (int i = 0; i < b.length; ) {
      int n = seq(b, i, b.length, cp);
      if (n == 0 || (n == 1 && (cp[0] < 0x20 || cp[0] == 0x7f))) {
        out.append(String.format("\\x%02x", b[i] & 0xFF));
        ++i;
      } else if (actsOnTerminal(cp[0])) {
        out.append(String.format("\\u%04x", cp[0]));
        i += n;
      } else {
        out.appendCodePoint(cp[0]);
        i += n;
      }
    }
    return out.toString();
  }

  /** fmt's "{}" of a double for the values that appear in messages (non-finite scales). */
  static String fmtDouble(double v) {
    if (Double.isNaN(v)) return "nan";
    if (Double.isInfinite(v)) return v > 0 ? "inf" : "-inf";
    return Double.toString(v);
  }

  static String u64(long v) {
    return Long.toUnsignedString(v);
  }

  static String hex8(int v) {
    return String.format("%08x", v);
  }
}
