package org.driftscope.tdump;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A filter (docs/filters.md): which of the tensors a producer offers are recorded. The same
 * syntax, semantics, canonical form and error messages (byte columns included) as
 * {@code driftscope::Filter} (src/format/filter.cpp). Immutable once parsed.
 */
public final class Filter {
  private enum Cmp {
    EQ("="), NE("!="), LT("<"), LE("<="), GT(">"), GE(">=");

    final String text;

    Cmp(String text) {
      this.text = text;
    }
  }

  private static boolean compare(long lhs, Cmp op, long rhs) {
    int c = Long.compareUnsigned(lhs, rhs);
    switch (op) {
      case EQ: return c == 0;
      case NE: return c != 0;
      case LT: return c < 0;
      case LE: return c <= 0;
      case GT: return c > 0;
      default: return c >= 0;
    }
  }

  private static final class Pred {
    final Cmp op;
    final long value;

    Pred(Cmp op, long value) {
      this.op = op;
      this.value = value;
    }
  }

  private static final class DimPred {
    boolean any = true;
    int index;
    Pred pred;
  }

  // ---- globs, on UTF-8 bytes ---------------------------------------------------------------

  /** Decodes one code point at i[0] (an invalid byte counts as one character) and advances. */
  static int nextCp(byte[] s, int[] i) {
    int b0 = s[i[0]] & 0xFF;
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 1;
    if (i[0] + len > s.length) len = 1;
    for (int k = 1; k < len; ++k) {
      if ((s[i[0] + k] & 0xC0) != 0x80) len = 1;
    }
    if (len == 1) {
      ++i[0];
      return b0;
    }
    int cp = b0 & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (s[i[0] + k] & 0x3F);
    i[0] += len;
    return cp;
  }

  /** Class match from just after '['; end[0] is past ']' or -1 when unterminated. */
  private static boolean classMatch(byte[] p, int j, int c, int[] end) {
    boolean negate = false;
    if (j < p.length && (p[j] == '!' || p[j] == '^')) {
      negate = true;
      ++j;
    }
    boolean matched = false;
    boolean first = true;
    int[] jj = new int[1];
    while (j < p.length) {
      if (p[j] == ']' && !first) {
        end[0] = j + 1;
        return matched != negate;
      }
      first = false;
      if (p[j] == '\\' && j + 1 < p.length) ++j;
      jj[0] = j;
      int lo = nextCp(p, jj);
      j = jj[0];
      int hi = lo;
      if (j + 1 < p.length && p[j] == '-' && p[j + 1] != ']') {
        ++j;
        if (p[j] == '\\' && j + 1 < p.length) ++j;
        jj[0] = j;
        hi = nextCp(p, jj);
        j = jj[0];
      }
      if (lo <= c && c <= hi) matched = true;
    }
    end[0] = -1;
    return false;
  }

  /** Whole-text glob match with one backtrack point (the last '*'): never exponential. */
  static boolean globMatch(byte[] pattern, byte[] text) {
    int p = 0;
    int t = 0;
    int starP = -1;
    int starT = 0;
    int[] cur = new int[1];
    int[] end = new int[1];
    while (t < text.length) {
      if (p < pattern.length) {
        byte pc = pattern[p];
        if (pc == '*') {
          starP = ++p;
          starT = t;
          continue;
        }
        if (pc == '?') {
          ++p;
          cur[0] = t;
          nextCp(text, cur);
          t = cur[0];
          continue;
        }
        if (pc == '[') {
          cur[0] = t;
          int c = nextCp(text, cur);
          boolean ok = classMatch(pattern, p + 1, c, end);
          if (end[0] != -1) {
            if (ok) {
              p = end[0];
              t = cur[0];
              continue;
            }
          } else if (text[t] == '[') {
            ++p;
            ++t;
            continue;
          }
        } else {
          int lit = (pc == '\\' && p + 1 < pattern.length) ? p + 1 : p;
          if (pattern[lit] == text[t]) {
            p = lit + 1;
            ++t;
            continue;
          }
        }
      }
      if (starP < 0) return false;
      p = starP;
      cur[0] = starT;
      nextCp(text, cur);
      starT = cur[0];
      t = cur[0];
    }
    while (p < pattern.length && pattern[p] == '*') ++p;
    return p == pattern.length;
  }

  private static final class Glob {
    final byte[] text;
    Glob(byte[] text) {
      this.text = text;
    }

    boolean match(byte[] s) {
      return globMatch(text, s);
    }

    String str() {
      return new String(text, StandardCharsets.UTF_8);
    }
  }

  private static boolean anyGlob(List<Glob> globs, byte[] s) {
    for (Glob g : globs) {
      if (g.match(s)) return true;
    }
    return false;
  }

  // ---- the parsed filter ----------------------------------------------------------------------

  private static final int ROLE_PRESENT = 0x80;
  private static final int DTYPE_PRESENT = 1;

  private final List<Glob> includes = new ArrayList<>();
  private final List<Glob> excludes = new ArrayList<>();
  private final List<List<Glob>> ops = new ArrayList<>();
  private int roleMask;
  private int dtypeMask;
  private final List<Pred> rank = new ArrayList<>();
  private final List<Pred> numel = new ArrayList<>();
  private final List<DimPred> dims = new ArrayList<>();
  private final List<Long> every = new ArrayList<>();
  private Long budget;

  private Filter() {}

  /** Parses a filter; a syntax error is {@code filter_syntax} with the 1-based byte column. */
  public static Filter parse(String text) throws TdumpException {
    Filter f = new Filter();
    new Parser(text.getBytes(StandardCharsets.UTF_8), f).run();
    return f;
  }

  /** The filter that records everything. */
  public static Filter all() {
    return new Filter();
  }

  public boolean isEmpty() {
    return includes.isEmpty() && excludes.isEmpty() && ops.isEmpty() && roleMask == 0 && dtypeMask == 0
        && rank.isEmpty() && numel.isEmpty() && dims.isEmpty() && every.isEmpty() && budget == null;
  }

  /** The payload-byte budget of the file, or -1 when there is none (the writer enforces it). */
  public long byteBudget() {
    return budget == null ? -1 : budget;
  }

  /** Whether a tensor offered with this exec_index passes every clause but the budget. */
  public boolean accepts(TensorInfo info, long execIndex) {
    for (long n : every) {
      if (Long.remainderUnsigned(execIndex, n) != 0) return false;
    }
    if (roleMask != 0) {
      if ((roleMask & ~ROLE_PRESENT & (1 << info.role().code())) == 0) return false;
    }
    if (dtypeMask != 0) {
      if ((dtypeMask & ~DTYPE_PRESENT & (1 << info.dtype().code())) == 0) return false;
    }
    for (Pred p : rank) {
      if (!compare(info.rank(), p.op, p.value)) return false;
    }
    if (!numel.isEmpty()) {
      long n = info.numel();
      for (Pred p : numel) {
        if (!compare(n, p.op, p.value)) return false;
      }
    }
    for (DimPred d : dims) {
      if (!checkDim(d, info)) return false;
    }
    if (!ops.isEmpty()) {
      byte[] op = Text.utf8(info.opType());
      for (List<Glob> globs : ops) {
        if (!anyGlob(globs, op)) return false;
      }
    }
    return mayAcceptName(info.name());
  }

  /** The name clauses only: false means no tensor of this name can pass. */
  public boolean mayAcceptName(String name) {
    byte[] n = Text.utf8(name);
    if (anyGlob(excludes, n)) return false;
    return includes.isEmpty() || anyGlob(includes, n);
  }

  private static boolean checkDim(DimPred d, TensorInfo info) {
    long[] shape = info.shape();
    if (d.any) {
      for (long x : shape) {
        if (compare(x, d.pred.op, d.pred.value)) return true;
      }
      return false;
    }
    int idx = d.index < 0 ? shape.length + d.index : d.index;
    if (idx < 0 || idx >= shape.length) return false;
    return compare(shape[idx], d.pred.op, d.pred.value);
  }

  private static boolean needsPlus(byte[] pattern) {
    if (pattern.length == 0) return true;
    if (pattern[0] == '+' || pattern[0] == '-' || pattern[0] == '!') return true;
    Filter probe = new Filter();
    try {
      new Parser(pattern, probe).run();
    } catch (TdumpException e) {
      return true;
    }
    return probe.includes.size() != 1;
  }

  private static String joinGlobs(List<Glob> globs) {
    StringBuilder out = new StringBuilder();
    for (Glob g : globs) {
      // "op=" then a glob starting with '=' would read back as the operator "==".
      String t = g.str();
      if (out.length() == 0 && t.startsWith("=")) out.append('\\');
      else if (out.length() > 0) out.append(',');
      out.append(t);
    }
    return out.toString();
  }

  /** The canonical text (docs/filters.md "Canonical form"); it parses back to the same filter. */
  @Override
  public String toString() {
    List<String> parts = new ArrayList<>();
    for (Glob g : includes) parts.add(needsPlus(g.text) ? "+" + g.str() : g.str());
    for (Glob g : excludes) parts.add("-" + g.str());
    for (List<Glob> globs : ops) parts.add("op=" + joinGlobs(globs));
    if (roleMask != 0) {
      List<String> names = new ArrayList<>();
      for (Role r : Role.values()) {
        if ((roleMask & (1 << r.code())) != 0) names.add(r.toString());
      }
      parts.add(names.isEmpty() ? "role=output role=input" : "role=" + String.join(",", names));
    }
    if (dtypeMask != 0) {
      List<String> names = new ArrayList<>();
      for (DType t : DType.values()) {
        if ((dtypeMask & (1 << t.code())) != 0) names.add(t.toString());
      }
      parts.add(names.isEmpty() ? "dtype=f32 dtype=f64" : "dtype=" + String.join(",", names));
    }
    for (Pred p : rank) parts.add("rank" + p.op.text + Long.toUnsignedString(p.value));
    for (Pred p : numel) parts.add("numel" + p.op.text + Long.toUnsignedString(p.value));
    for (DimPred d : dims) {
      parts.add("dim" + (d.any ? "" : "[" + d.index + "]") + d.pred.op.text + Long.toUnsignedString(d.pred.value));
    }
    for (long n : every) parts.add("every=" + Long.toUnsignedString(n));
    if (budget != null) parts.add("budget=" + Long.toUnsignedString(budget));
    return String.join(" ", parts);
  }

  // ---- parser ---------------------------------------------------------------------------------

  private static final List<String> KEYS = Arrays.asList("op", "role", "dtype", "rank", "numel", "dim", "every", "budget");

  private static boolean blank(byte c) {
    return c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == 0x0b;
  }

  private static final class Parser {
    private final byte[] text;
    private final Filter out;

    Parser(byte[] text, Filter out) {
      this.text = text;
      this.out = out;
    }

    /** A clause: its bytes and 0-based offset in the filter text. */
    private static final class Clause {
      final byte[] t;
      final int pos;

      Clause(byte[] t, int pos) {
        this.t = t;
        this.pos = pos;
      }

      String sub(int from) {
        return sub(from, t.length);
      }

      String sub(int from, int to) {
        return new String(t, from, to - from, StandardCharsets.UTF_8);
      }
    }

    void run() throws TdumpException {
      int i = 0;
      while (i < text.length) {
        if (blank(text[i])) {
          ++i;
          continue;
        }
        int start = i;
        while (i < text.length) {
          byte d = text[i];
          if (d == '\\' && i + 1 < text.length) {
            i += 2;
            continue;
          }
          if (blank(d)) break;
          ++i;
        }
        clause(new Clause(Arrays.copyOfRange(text, start, i), start));
      }
    }

    private TdumpException fail(Clause c, int at, String why) {
      return TdumpException.make(ErrorCode.FILTER_SYNTAX, "filter column " + (c.pos + at + 1) + ": " + why + " (in clause '"
          + c.sub(0) + "' at column " + (c.pos + 1) + ")");
    }

    private void clause(Clause c) throws TdumpException {
      byte first = c.t[0];
      if (first == '+' || first == '-' || first == '!') {
        pattern(c, 1, first == '+' ? out.includes : out.excludes);
        return;
      }
      int k = 0;
      while (k < c.t.length && c.t[k] >= 'a' && c.t[k] <= 'z') ++k;
      int afterKey = k;
      if (k > 0 && k < c.t.length && c.t[k] == '[') {
        int close = -1;
        for (int j = k; j < c.t.length; ++j) {
          if (c.t[j] == ']') {
            close = j;
            break;
          }
        }
        if (close >= 0) k = close + 1;
      }
      int opLen = 0;
      Cmp[] op = {Cmp.EQ};
      if (k > 0) opLen = readCmp(c.t, k, op);
      if (opLen == 0) {
        pattern(c, 0, out.includes);
        return;
      }
      String key = c.sub(0, afterKey);
      if (!KEYS.contains(key)) {
        throw fail(c, 0, "unknown key '" + key + "' (known: op role dtype rank numel dim every budget; write '+" + c.sub(0)
            + "' for a name pattern)");
      }
      if (k != afterKey && !key.equals("dim")) throw fail(c, afterKey, "'" + key + "' takes no [index]");
      int v = k + opLen;
      if (v >= c.t.length) throw fail(c, v, "missing value after '" + c.sub(0) + "'");
      if (key.equals("op") || key.equals("role") || key.equals("dtype") || key.equals("every") || key.equals("budget")) {
        if (op[0] != Cmp.EQ) throw fail(c, k, "'" + key + "' takes '=', not '" + op[0].text + "'");
      }
      switch (key) {
        case "op":
          opList(c, v);
          return;
        case "role":
          roleList(c, v);
          return;
        case "dtype":
          dtypeList(c, v);
          return;
        case "every": {
          long n = number(c, v, false);
          if (n == 0) throw fail(c, v, "every=N needs N >= 1");
          out.every.add(n);
          return;
        }
        case "budget": {
          if (out.budget != null) throw fail(c, 0, "budget given twice");
          out.budget = bytes(c, v);
          return;
        }
        default:
          break;
      }
      long n = number(c, v, key.equals("numel"));
      if (key.equals("rank")) {
        out.rank.add(new Pred(op[0], n));
      } else if (key.equals("numel")) {
        out.numel.add(new Pred(op[0], n));
      } else {
        DimPred d = new DimPred();
        d.pred = new Pred(op[0], n);
        if (k != afterKey) {
          String idx = c.sub(afterKey + 1, k - 1);
          Integer iv = parseIndex(idx);
          if (iv == null || iv >= Limits.MAX_RANK || iv < -Limits.MAX_RANK) {
            throw fail(c, afterKey + 1, "dim index '" + idx + "' is not an integer in -" + Limits.MAX_RANK + ".." + (Limits.MAX_RANK - 1));
          }
          d.any = false;
          d.index = iv;
        }
        out.dims.add(d);
      }
    }

    /** std::from_chars for int32: optional '-', digits, nothing else. */
    private static Integer parseIndex(String s) {
      if (s.isEmpty()) return null;
      int i = s.charAt(0) == '-' ? 1 : 0;
      if (i == s.length()) return null;
      long v = 0;
      for (int k = i; k < s.length(); ++k) {
        char ch = s.charAt(k);
        if (ch < '0' || ch > '9') return null;
        v = v * 10 + (ch - '0');
        if (v > (1L << 31)) return null;
      }
      v = i == 1 ? -v : v;
      if (v > Integer.MAX_VALUE || v < Integer.MIN_VALUE) return null;
      return (int) v;
    }

    private static int readCmp(byte[] s, int at, Cmp[] op) {
      String[] texts = {"==", "!=", "<=", ">=", "=", "<", ">"};
      Cmp[] cmps = {Cmp.EQ, Cmp.NE, Cmp.LE, Cmp.GE, Cmp.EQ, Cmp.LT, Cmp.GT};
      for (int r = 0; r < texts.length; ++r) {
        String t = texts[r];
        if (at + t.length() > s.length) continue;
        boolean ok = true;
        for (int i = 0; i < t.length(); ++i) ok &= s[at + i] == t.charAt(i);
        if (ok) {
          op[0] = cmps[r];
          return t.length();
        }
      }
      return 0;
    }

    /** Validation of a glob at parse time: index of the problem and why[0], or -1. */
    private static int globProblem(byte[] p, String[] why) {
      int[] jj = new int[1];
      for (int i = 0; i < p.length; ) {
        if (p[i] == '\\') {
          if (i + 1 == p.length) {
            why[0] = "dangling '\\' at the end of the pattern";
            return i;
          }
          i += 2;
          continue;
        }
        if (p[i] != '[') {
          ++i;
          continue;
        }
        int open = i;
        int j = i + 1;
        if (j < p.length && (p[j] == '!' || p[j] == '^')) ++j;
        boolean first = true;
        boolean closed = false;
        while (j < p.length) {
          if (p[j] == ']' && !first) {
            closed = true;
            ++j;
            break;
          }
          first = false;
          if (p[j] == '\\' && j + 1 < p.length) ++j;
          int loAt = j;
          jj[0] = j;
          int lo = nextCp(p, jj);
          j = jj[0];
          if (j + 1 < p.length && p[j] == '-' && p[j + 1] != ']') {
            ++j;
            if (p[j] == '\\' && j + 1 < p.length) ++j;
            jj[0] = j;
            int hi = nextCp(p, jj);
            j = jj[0];
            if (hi < lo) {
              why[0] = "reversed range '" + new String(p, loAt, j - loAt, StandardCharsets.UTF_8) + "' in character class";
              return loAt;
            }
          }
        }
        if (!closed) {
          why[0] = "unterminated character class '[' (no closing ']')";
          return open;
        }
        i = j;
      }
      return -1;
    }

    private void checkGlob(Clause c, int at, byte[] glob) throws TdumpException {
      if (glob.length == 0) throw fail(c, at, "empty pattern");
      String[] why = new String[1];
      int bad = globProblem(glob, why);
      if (bad >= 0) throw fail(c, at + bad, why[0]);
    }

    private void pattern(Clause c, int at, List<Glob> into) throws TdumpException {
      byte[] glob = Arrays.copyOfRange(c.t, at, c.t.length);
      checkGlob(c, at, glob);
      into.add(new Glob(glob));
    }

    private interface Item {
      void each(byte[] item, int at) throws TdumpException;
    }

    /** Splits VALUE at commas; a backslash-escaped comma stays in the item. */
    private void items(Clause c, int v, Item each) throws TdumpException {
      int i = v;
      while (true) {
        int start = i;
        while (i < c.t.length && c.t[i] != ',') i += (c.t[i] == '\\' && i + 1 < c.t.length) ? 2 : 1;
        if (i == start) throw fail(c, start, "empty list item");
        each.each(Arrays.copyOfRange(c.t, start, i), start);
        if (i >= c.t.length) return;
        ++i;
      }
    }

    private void opList(Clause c, int v) throws TdumpException {
      List<Glob> globs = new ArrayList<>();
      items(c, v, (item, at) -> {
        checkGlob(c, at, item);
        globs.add(new Glob(item));
      });
      out.ops.add(globs);
    }

    private void roleList(Clause c, int v) throws TdumpException {
      int[] mask = {0};
      items(c, v, (item, at) -> {
        Role r = Role.parse(new String(item, StandardCharsets.UTF_8));
        if (r == null) {
          throw fail(c, at, "unknown role '" + new String(item, StandardCharsets.UTF_8) + "' (known: output input parameter other)");
        }
        mask[0] |= 1 << r.code();
      });
      // Two role clauses must both hold: the allowed set is their intersection.
      out.roleMask = (out.roleMask != 0 ? (out.roleMask & mask[0]) : mask[0]) | ROLE_PRESENT;
    }

    private void dtypeList(Clause c, int v) throws TdumpException {
      int[] mask = {0};
      items(c, v, (item, at) -> {
        DType t = DType.parse(new String(item, StandardCharsets.UTF_8));
        if (t == null) throw fail(c, at, "unknown dtype '" + new String(item, StandardCharsets.UTF_8) + "'");
        mask[0] |= 1 << t.code();
      });
      out.dtypeMask = (out.dtypeMask != 0 ? (out.dtypeMask & mask[0]) : mask[0]) | DTYPE_PRESENT;
    }

    private static final long MAX = -1L;

    private static boolean overTen(long mant) {
      // mant > (2^64 - 1 - 9) / 10, unsigned
      return Long.compareUnsigned(mant, Long.divideUnsigned(MAX - 9, 10)) > 0;
    }

    /** Unsigned integer with an optional decimal suffix (k, M, G, T) for counts. */
    private long number(Clause c, int v, boolean suffixes) throws TdumpException {
      byte[] s = Arrays.copyOfRange(c.t, v, c.t.length);
      int i = 0;
      long mant = 0;
      long fracDiv = 1;
      boolean digits = false;
      boolean dot = false;
      for (; i < s.length; ++i) {
        if (s[i] == '.' && !dot && suffixes) {
          dot = true;
          continue;
        }
        if (s[i] < '0' || s[i] > '9') break;
        digits = true;
        if (overTen(mant)) throw fail(c, v, "number out of range");
        mant = mant * 10 + (s[i] - '0');
        if (dot) {
          if (Long.compareUnsigned(fracDiv, Long.divideUnsigned(MAX, 10)) > 0) throw fail(c, v, "number out of range");
          fracDiv *= 10;
        }
      }
      String rest = new String(s, i, s.length - i, StandardCharsets.UTF_8);
      if (!digits) throw fail(c, v + i, "expected a number, found '" + rest + "'");
      long mult = 1;
      if (!rest.isEmpty()) {
        if (!suffixes) throw fail(c, v + i, "unexpected '" + rest + "' after the number");
        switch (rest) {
          case "k": mult = 1000L; break;
          case "M": mult = 1000000L; break;
          case "G": mult = 1000000000L; break;
          case "T": mult = 1000000000000L; break;
          default: throw fail(c, v + i, "unknown suffix '" + rest + "' (use k, M, G or T)");
        }
      }
      return scale(c, v, mant, fracDiv, mult);
    }

    private static long gcd(long a, long b) {
      while (b != 0) {
        long t = Long.remainderUnsigned(a, b);
        a = b;
        b = t;
      }
      return a;
    }

    private long scale(Clause c, int v, long mant, long fracDiv, long mult) throws TdumpException {
      // mant × mult / frac_div is whole iff frac_div divides mant once the common factor of mult
      // and frac_div is cancelled.
      long g = gcd(mult, fracDiv);
      mult = Long.divideUnsigned(mult, g);
      fracDiv = Long.divideUnsigned(fracDiv, g);
      if (Long.remainderUnsigned(mant, fracDiv) != 0) throw fail(c, v, "value is not a whole number");
      long whole = Long.divideUnsigned(mant, fracDiv);
      if (Unsigned.mulOverflows(whole, mult)) throw fail(c, v, "number out of range");
      return whole * mult;
    }

    /** Byte sizes: decimal (k/kB, M/MB, G/GB, T/TB) and binary (KiB, MiB, GiB, TiB) units. */
    private long bytes(Clause c, int v) throws TdumpException {
      byte[] s = Arrays.copyOfRange(c.t, v, c.t.length);
      int i = 0;
      while (i < s.length && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
      String suf = new String(s, i, s.length - i, StandardCharsets.UTF_8);
      String[] names = {"", "B", "k", "kB", "M", "MB", "G", "GB", "T", "TB", "KiB", "MiB", "GiB", "TiB"};
      long[] mults = {1, 1, 1000, 1000, 1000000, 1000000, 1000000000L, 1000000000L, 1000000000000L, 1000000000000L,
        1L << 10, 1L << 20, 1L << 30, 1L << 40};
      long unit = 0;
      for (int u = 0; u < names.length; ++u) {
        if (names[u].equals(suf)) unit = mults[u];
      }
      if (unit == 0) {
        throw fail(c, v + i, "unknown unit '" + suf + "' (use B, k, M, G, T, kB, MB, GB, TB, KiB, MiB, GiB or TiB)");
      }
      String num = new String(s, 0, i, StandardCharsets.UTF_8);
      int dotp = num.indexOf('.');
      if (num.isEmpty() || num.equals(".") || (dotp >= 0 && num.indexOf('.', dotp + 1) >= 0)) {
        throw fail(c, v, "expected a byte count, found '" + new String(s, StandardCharsets.UTF_8) + "'");
      }
      long mant = 0;
      long fracDiv = 1;
      boolean dot = false;
      for (int k = 0; k < num.length(); ++k) {
        char ch = num.charAt(k);
        if (ch == '.') {
          dot = true;
          continue;
        }
        if (overTen(mant)) throw fail(c, v, "number out of range");
        mant = mant * 10 + (ch - '0');
        if (dot) {
          if (Long.compareUnsigned(fracDiv, Long.divideUnsigned(MAX, 10)) > 0) throw fail(c, v, "number out of range");
          fracDiv *= 10;
        }
      }
      return scale(c, v, mant, fracDiv, unit);
    }
  }
}
