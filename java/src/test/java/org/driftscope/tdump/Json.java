package org.driftscope.tdump;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A minimal JSON reader for the vector sidecars (tests only; the library has no JSON). */
final class Json {
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  /** Objects are LinkedHashMap, arrays ArrayList, numbers Num, strings String, true/false Boolean, null null. */
  static Object parse(String text) {
    Json j = new Json(text);
    Object v = j.value();
    j.ws();
    if (j.i != text.length()) throw new IllegalArgumentException("trailing data at " + j.i);
    return v;
  }

  /** A number kept as written, so u64 values survive. */
  static final class Num {
    final String text;

    Num(String text) {
      this.text = text;
    }

    boolean isInteger() {
      return !(text.contains(".") || text.contains("e") || text.contains("E"));
    }

    /** As a u64/i64 bit pattern. */
    long asLong() {
      return new BigInteger(text).longValue();
    }

    double asDouble() {
      return Double.parseDouble(text);
    }

    @Override
    public String toString() {
      return text;
    }
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) ++i;
  }

  private Object value() {
    ws();
    char c = s.charAt(i);
    if (c == '{') {
      ++i;
      Map<String, Object> m = new LinkedHashMap<>();
      ws();
      if (s.charAt(i) == '}') {
        ++i;
        return m;
      }
      while (true) {
        ws();
        String k = string();
        ws();
        expect(':');
        m.put(k, value());
        ws();
        if (s.charAt(i) == ',') {
          ++i;
          continue;
        }
        expect('}');
        return m;
      }
    }
    if (c == '[') {
      ++i;
      List<Object> a = new ArrayList<>();
      ws();
      if (s.charAt(i) == ']') {
        ++i;
        return a;
      }
      while (true) {
        a.add(value());
        ws();
        if (s.charAt(i) == ',') {
          ++i;
          continue;
        }
        expect(']');
        return a;
      }
    }
    if (c == '"') return string();
    if (s.startsWith("true", i)) {
      i += 4;
      return Boolean.TRUE;
    }
    if (s.startsWith("false", i)) {
      i += 5;
      return Boolean.FALSE;
    }
    if (s.startsWith("null", i)) {
      i += 4;
      return null;
    }
    int start = i;
    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) ++i;
    if (start == i) throw new IllegalArgumentException("unexpected '" + c + "' at " + i);
    return new Num(s.substring(start, i));
  }

  private void expect(char c) {
    if (s.charAt(i) != c) throw new IllegalArgumentException("expected '" + c + "' at " + i);
    ++i;
  }

  private String string() {
    expect('"');
    StringBuilder b = new StringBuilder();
    while (true) {
      char c = s.charAt(i++);
      if (c == '"') return b.toString();
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(i++);
      switch (e) {
        case 'n': b.append('\n'); break;
        case 't': b.append('\t'); break;
        case 'r': b.append('\r'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u':
          b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          i += 4;
          break;
        default: b.append(e);
      }
    }
  }

  // ---- accessors ------------------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  static Map<String, Object> obj(Object o) {
    return (Map<String, Object>) o;
  }

  @SuppressWarnings("unchecked")
  static List<Object> arr(Object o) {
    return (List<Object>) o;
  }

  static long lng(Object o) {
    return ((Num) o).asLong();
  }

  /** A number, or the strings "nan", "inf", "-inf" the sidecars use. */
  static double dbl(Object o) {
    if (o instanceof String) {
      String t = (String) o;
      if (t.equals("nan")) return Double.NaN;
      return t.equals("inf") ? Double.POSITIVE_INFINITY : Double.NEGATIVE_INFINITY;
    }
    if (o instanceof Boolean) return ((Boolean) o) ? 1 : 0;
    return ((Num) o).asDouble();
  }
}
