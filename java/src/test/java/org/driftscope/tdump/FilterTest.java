package org.driftscope.tdump;

/**
 * Filters (docs/filters.md): the examples of the page, its canonical form and its error messages
 * word for word. The same strings against the C++ filter, at scale, are in tests/python/test_java.py.
 */
public final class FilterTest {
  static boolean accepts(String filter, TensorInfo t, long exec) throws TdumpException {
    return Filter.parse(filter).accepts(t, exec);
  }

  static TensorInfo t(String name) {
    return new TensorInfo(name, DType.F32, 2, 3);
  }

  public static void main(String[] args) throws Exception {
    // Globs: '*' crosses dots; the whole name must match.
    String f = "encoder.layers.3*";
    for (String yes : new String[] {"encoder.layers.3", "encoder.layers.3.mlp", "encoder.layers.30", "encoder.layers.39"}) {
      Check.that(accepts(f, t(yes), 0), f + " accepts " + yes);
    }
    for (String no : new String[] {"encoder.layers.4", "encoder.layers.13", "x.encoder.layers.3"}) {
      Check.that(!accepts(f, t(no), 0), f + " refuses " + no);
    }
    Check.that(accepts("*.layers.[0-3].* -*.bias !*.weight", t("m.layers.2.attn"), 0), "class");
    Check.that(!accepts("*.layers.[0-3].* -*.bias !*.weight", t("m.layers.2.bias"), 0), "excludes win");
    Check.that(!accepts("*.layers.[0-3].* -*.bias !*.weight", t("m.layers.5.attn"), 0), "class range");
    Check.that(accepts("[!a-z]*", t("9x"), 0) && !accepts("[^a-z]*", t("x9"), 0), "negated classes");
    Check.that(accepts("?é", t("xé"), 0) && !accepts("?", t("éé"), 0), "'?' is one code point");
    Check.that(accepts("my\\ layer", t("my layer"), 0), "escaped blank");
    Check.that(accepts("+rank=2", t("rank=2"), 0) && !accepts("+rank=2", t("x"), 0), "'+' makes a key clause a name");
    Check.that(accepts("+-x", t("-x"), 0), "'+-x' names '-x'");
    // Key clauses, AND'ed.
    TensorInfo lin = new TensorInfo("fc", DType.F16, 4, 768).opType("Linear").role(Role.OUTPUT);
    Check.that(accepts("op=Linear,MatMul role=output", lin, 0), "op list");
    Check.that(!accepts("op=*Norm op=Layer*", lin, 0), "two op clauses");
    Check.that(!accepts("role=input role=output", lin, 0), "empty role intersection");
    Check.that(accepts("dtype=f16,bf16 numel>=3k", lin, 0), "dtype and numel suffix");
    Check.that(accepts("dtype=half", lin, 0) && !accepts("dtype=float32", lin, 0), "dtype aliases");
    Check.that(accepts("dim[-1]=768 rank>=2", lin, 0) && !accepts("dim[2]=768", lin, 0), "dim index");
    Check.that(accepts("dim=4", lin, 0) && !accepts("dim>768", lin, 0), "some dim");
    Check.that(accepts("numel=1.5k", new TensorInfo("x", DType.F32, 1500), 0), "1.5k = 1500");
    Check.that(accepts("numel=1", new TensorInfo("x", DType.F32), 0), "rank 0 has one element");
    Check.that(accepts("numel=0", new TensorInfo("x", DType.F32, 3, 0), 0), "a zero dim has none");
    Check.that(accepts("every=4", lin, 8) && !accepts("every=4", lin, 9), "every=N tests exec_index");
    Check.eq(1610612736L, Filter.parse("budget=1.5GiB").byteBudget(), "1.5GiB");
    Check.eq(-1L, Filter.parse("x").byteBudget(), "no budget");
    Check.that(Filter.parse(" ;; ").isEmpty(), "empty clauses are ignored");
    Check.that(!Filter.parse("-*.dropout").mayAcceptName("a.dropout") && Filter.parse("a*").mayAcceptName("ab"), "mayAcceptName");

    // Canonical form (docs/filters.md).
    Check.eq("a -z op=Add role=input dtype=f16 numel>1000 dim[-1]=3 every=4 budget=1024",
        Filter.parse("budget=1KiB every=4 dim[-1]=3 numel>1k dtype=half role=input op=Add -z +a").toString(), "canonical");
    Check.eq("+rank=2 +-x", Filter.parse("+rank=2 +-x").toString(), "'+' kept where needed");
    Check.eq("op=\\=x", Filter.parse("op===x").toString(), "op glob starting with '='");

    // Errors: the messages of docs/filters.md, word for word.
    String[][] errors = {
      {"rank<=x", "filter column 7: expected a number, found 'x' (in clause 'rank<=x' at column 1)"},
      {"a foo=3", "filter column 3: unknown key 'foo' (known: op role dtype rank numel dim every budget; write '+foo=3' for a name pattern) (in clause 'foo=3' at column 3)"},
      {"layers.[0-3", "filter column 8: unterminated character class '[' (no closing ']') (in clause 'layers.[0-3' at column 1)"},
      {"budget=1 budget=2", "filter column 10: budget given twice (in clause 'budget=2' at column 10)"},
      {"numel=1.5", "filter column 7: value is not a whole number (in clause 'numel=1.5' at column 1)"},
      {"x[9-0]", "filter column 3: reversed range '9-0' in character class (in clause 'x[9-0]' at column 1)"},
      {"a\\", "filter column 2: dangling '\\' at the end of the pattern (in clause 'a\\' at column 1)"},
      {"every=0", "filter column 7: every=N needs N >= 1 (in clause 'every=0' at column 1)"},
      {"role=boss", "filter column 6: unknown role 'boss' (known: output input parameter other) (in clause 'role=boss' at column 1)"},
      {"dim[16]=1", "filter column 5: dim index '16' is not an integer in -16..15 (in clause 'dim[16]=1' at column 1)"},
      {"rank=99999999999999999999", "filter column 6: number out of range (in clause 'rank=99999999999999999999' at column 1)"},
    };
    for (String[] e : errors) {
      TdumpException x = Check.fails(ErrorCode.FILTER_SYNTAX, () -> Filter.parse(e[0]), e[0]);
      Check.eq(e[1], x.getMessage(), "message of " + e[0]);
      Check.eq(TdumpException.NO_OFFSET, x.offset(), "no offset");
    }
    // Matching is never exponential: one backtrack point.
    StringBuilder p = new StringBuilder();
    for (int i = 0; i < 30; ++i) p.append("*a");
    p.append("b");
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < 5000; ++i) s.append('a');
    Check.that(!Filter.parse(p.toString()).mayAcceptName(s.toString()), "no match (and no hang)");
    Check.done("FilterTest");
  }
}
