// Filters (docs/filters.md): every clause, combinations, canonical round trip, syntax errors with
// their columns, and glob corner cases.
#include "driftscope/filter.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace driftscope {
namespace {

TensorInfo tensor(std::string name, std::vector<uint64_t> shape = {2, 3}, DType dtype = DType::f32,
                  std::string op = "Linear", Role role = Role::output) {
  TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.op_type = std::move(op);
  t.role = role;
  return t;
}

Filter parse_ok(std::string_view text) {
  auto f = Filter::parse(text);
  EXPECT_TRUE(f.ok()) << text << ": " << (f.ok() ? "" : f.error().to_string());
  return f.ok() ? std::move(f).value() : Filter{};
}

// ---- glob_match ------------------------------------------------------------------------------

TEST(GlobMatch, LayerPrefixMatchesLayer3And30To39Only) {
  const std::string_view g = "encoder.layers.3*";
  EXPECT_TRUE(glob_match(g, "encoder.layers.3"));
  EXPECT_TRUE(glob_match(g, "encoder.layers.3.attn.q_proj"));
  for (int i = 30; i <= 39; ++i)
    EXPECT_TRUE(glob_match(g, "encoder.layers." + std::to_string(i) + ".mlp")) << i;
  EXPECT_FALSE(glob_match(g, "encoder.layers.4"));
  EXPECT_FALSE(glob_match(g, "encoder.layers.4.attn"));
  EXPECT_FALSE(glob_match(g, "encoder.layers.13"));
  EXPECT_FALSE(glob_match(g, "decoder.layers.3"));
  EXPECT_FALSE(glob_match(g, "encoder.layers."));
}

TEST(GlobMatch, AnchoredAtBothEnds) {
  EXPECT_TRUE(glob_match("norm", "norm"));
  EXPECT_FALSE(glob_match("norm", "layer.norm"));
  EXPECT_FALSE(glob_match("norm", "norm.weight"));
  EXPECT_TRUE(glob_match("*norm", "layer.norm"));
  EXPECT_TRUE(glob_match("*.norm*", "layers.1.norm.weight"));
}

TEST(GlobMatch, StarMatchesDotsAndEmpty) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "a.b.c"));
  EXPECT_TRUE(glob_match("a*c", "ac"));
  EXPECT_TRUE(glob_match("a*c", "a.b.c"));
  EXPECT_TRUE(glob_match("a**c", "abc"));
  EXPECT_FALSE(glob_match("a*c", "a.b.cd"));
  EXPECT_TRUE(glob_match("a*b*c", "a_b_b_c"));
  EXPECT_FALSE(glob_match("a*b*c", "a_c_b"));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("", ""));
}

TEST(GlobMatch, QuestionMarkIsOneCharacterIncludingMultibyte) {
  EXPECT_TRUE(glob_match("layer.?", "layer.7"));
  EXPECT_FALSE(glob_match("layer.?", "layer.10"));
  EXPECT_FALSE(glob_match("layer.?", "layer."));
  EXPECT_TRUE(glob_match("t?st", "t\xC3\xA9st"));         // é: two bytes, one character
  EXPECT_TRUE(glob_match("?", "\xE2\x82\xAC"));           // €: three bytes
  EXPECT_FALSE(glob_match("??", "\xE2\x82\xAC"));
}

TEST(GlobMatch, ClassesRangesAndNegation) {
  EXPECT_TRUE(glob_match("layers.[0-3]", "layers.2"));
  EXPECT_FALSE(glob_match("layers.[0-3]", "layers.5"));
  EXPECT_TRUE(glob_match("layers.[!0-3]", "layers.5"));
  EXPECT_FALSE(glob_match("layers.[!0-3]", "layers.1"));
  EXPECT_TRUE(glob_match("layers.[^0-3]", "layers.9"));
  EXPECT_TRUE(glob_match("[abc]x", "bx"));
  EXPECT_FALSE(glob_match("[abc]x", "dx"));
  EXPECT_TRUE(glob_match("[a-cx-z]", "y"));
  EXPECT_TRUE(glob_match("[]]", "]"));      // ']' first in a class is a member
  EXPECT_TRUE(glob_match("[!]]", "a"));
  EXPECT_FALSE(glob_match("[!]]", "]"));
  EXPECT_TRUE(glob_match("[a-]", "-"));     // '-' last is a member
  EXPECT_TRUE(glob_match("[\xC3\xA0-\xC3\xBF]", "\xC3\xA9"));  // à-ÿ contains é
  EXPECT_TRUE(glob_match("*.[qkv]_proj", "attn.k_proj"));
  EXPECT_FALSE(glob_match("*.[qkv]_proj", "attn.o_proj"));
}

TEST(GlobMatch, EscapesMakeMetacharactersLiteral) {
  EXPECT_TRUE(glob_match("a\\*b", "a*b"));
  EXPECT_FALSE(glob_match("a\\*b", "axb"));
  EXPECT_TRUE(glob_match("a\\?", "a?"));
  EXPECT_FALSE(glob_match("a\\?", "ab"));
  EXPECT_TRUE(glob_match("x\\[0]", "x[0]"));
  EXPECT_TRUE(glob_match("[\\]a]", "]"));
  EXPECT_TRUE(glob_match("a\\\\b", "a\\b"));
}

TEST(GlobMatch, UnterminatedClassIsALiteralBracket) {
  EXPECT_TRUE(glob_match("x[0", "x[0"));
  EXPECT_FALSE(glob_match("x[0", "x0"));
}

TEST(GlobMatch, PathologicalPatternIsNotExponential) {
  std::string text(4000, 'a');
  std::string pat;
  for (int i = 0; i < 40; ++i) pat += "a*";
  pat += "b";
  EXPECT_FALSE(glob_match(pat, text));  // would take forever with naive recursion
  EXPECT_TRUE(glob_match(pat.substr(0, pat.size() - 1), text));
}

// ---- clauses ----------------------------------------------------------------------------------

TEST(Filter, EmptyAcceptsEverything) {
  for (std::string_view text : {"", "   ", " ; ;\t"}) {
    Filter f = parse_ok(text);
    EXPECT_TRUE(f.empty());
    EXPECT_TRUE(f.accepts(tensor("anything"), 17));
    EXPECT_TRUE(f.may_accept_name("x"));
    EXPECT_FALSE(f.byte_budget());
    EXPECT_EQ(f.to_string(), "");
  }
  Filter def;
  EXPECT_TRUE(def.empty());
  EXPECT_TRUE(def.accepts(tensor("x"), 0));
}

TEST(Filter, IncludesAreOred) {
  Filter f = parse_ok("encoder.layers.3* +decoder.*");
  EXPECT_TRUE(f.accepts(tensor("encoder.layers.31.norm"), 0));
  EXPECT_TRUE(f.accepts(tensor("decoder.out"), 0));
  EXPECT_FALSE(f.accepts(tensor("encoder.layers.4.norm"), 0));
  EXPECT_FALSE(f.accepts(tensor("embed"), 0));
}

TEST(Filter, ExcludesWinOverIncludes) {
  Filter f = parse_ok("encoder.* -*.dropout !*.attn.*");
  EXPECT_TRUE(f.accepts(tensor("encoder.layers.0.mlp"), 0));
  EXPECT_FALSE(f.accepts(tensor("encoder.layers.0.dropout"), 0));
  EXPECT_FALSE(f.accepts(tensor("encoder.layers.0.attn.q"), 0));
  Filter only_ex = parse_ok("-*.bias");
  EXPECT_TRUE(only_ex.accepts(tensor("fc.weight"), 0));
  EXPECT_FALSE(only_ex.accepts(tensor("fc.bias"), 0));
}

TEST(Filter, MayAcceptNameLooksOnlyAtNames) {
  Filter f = parse_ok("encoder.layers.3* -*.dropout rank=2 dtype=f16");
  EXPECT_TRUE(f.may_accept_name("encoder.layers.3.mlp"));
  EXPECT_FALSE(f.may_accept_name("encoder.layers.4.mlp"));
  EXPECT_FALSE(f.may_accept_name("encoder.layers.3.dropout"));
  // The name passes, but dtype does not: may_accept_name is only a necessary condition.
  EXPECT_FALSE(f.accepts(tensor("encoder.layers.3.mlp", {2, 2}, DType::f32), 0));
  EXPECT_TRUE(f.accepts(tensor("encoder.layers.3.mlp", {2, 2}, DType::f16), 0));
}

TEST(Filter, OpGlobs) {
  Filter f = parse_ok("op=Linear,*Norm");
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::f32, "Linear"), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::f32, "LayerNorm"), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::f32, "MatMul"), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::f32, ""), 0));
  Filter both = parse_ok("op=*Norm op=Layer*");  // two clauses: both must hold
  EXPECT_TRUE(both.accepts(tensor("a", {1}, DType::f32, "LayerNorm"), 0));
  EXPECT_FALSE(both.accepts(tensor("a", {1}, DType::f32, "RMSNorm"), 0));
}

TEST(Filter, Roles) {
  Filter f = parse_ok("role=output,parameter");
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::f32, "", Role::output), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::f32, "", Role::parameter), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::f32, "", Role::input), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::f32, "", Role::other), 0));
  TensorInfo bogus = tensor("a");
  bogus.role = static_cast<Role>(200);  // not a role: no role clause can accept it
  EXPECT_FALSE(f.accepts(bogus, 0));
  EXPECT_TRUE(parse_ok("a").accepts(bogus, 0));
  Filter none = parse_ok("role=input role=output");
  EXPECT_FALSE(none.accepts(tensor("a", {1}, DType::f32, "", Role::input), 0));
  EXPECT_FALSE(none.accepts(tensor("a", {1}, DType::f32, "", Role::output), 0));
  EXPECT_EQ(parse_ok(none.to_string()).to_string(), none.to_string());
  EXPECT_FALSE(parse_ok(none.to_string()).accepts(tensor("a", {1}, DType::f32, "", Role::output), 0));
}

TEST(Filter, DtypesByNameAndAlias) {
  Filter f = parse_ok("dtype=float16,bf16,int8");
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::f16), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::bf16), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1}, DType::i8), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::f32), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1}, DType::u8), 0));
  EXPECT_EQ(f.to_string(), "dtype=f16,bf16,i8");
}

TEST(Filter, RankComparisons) {
  struct Case {
    const char* text;
    std::vector<bool> expect;  // for ranks 0..4
  };
  const Case cases[] = {
      {"rank=2", {false, false, true, false, false}},
      {"rank==2", {false, false, true, false, false}},
      {"rank!=2", {true, true, false, true, true}},
      {"rank<2", {true, true, false, false, false}},
      {"rank<=2", {true, true, true, false, false}},
      {"rank>2", {false, false, false, true, true}},
      {"rank>=2", {false, false, true, true, true}},
      {"rank>=1 rank<=3", {false, true, true, true, false}},
  };
  for (const auto& c : cases) {
    Filter f = parse_ok(c.text);
    for (size_t r = 0; r < c.expect.size(); ++r)
      EXPECT_EQ(f.accepts(tensor("a", std::vector<uint64_t>(r, 2)), 0), c.expect[r])
          << c.text << " rank " << r;
  }
}

TEST(Filter, NumelWithSuffixes) {
  Filter f = parse_ok("numel>=1k numel<1.5M");
  EXPECT_FALSE(f.accepts(tensor("a", {999}), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1000}), 0));
  EXPECT_TRUE(f.accepts(tensor("a", {1499, 1000}), 0));
  EXPECT_FALSE(f.accepts(tensor("a", {1500, 1000}), 0));
  EXPECT_EQ(f.to_string(), "numel>=1000 numel<1500000");
  Filter scalar = parse_ok("numel=1");
  EXPECT_TRUE(scalar.accepts(tensor("a", {}), 0));  // rank 0 has one element
  Filter empty_t = parse_ok("numel=0");
  EXPECT_TRUE(empty_t.accepts(tensor("a", {4, 0, 3}), 0));
  EXPECT_EQ(parse_ok("numel<2G").to_string(), "numel<2000000000");
  EXPECT_EQ(parse_ok("numel<3T").to_string(), "numel<3000000000000");
}

TEST(Filter, DimAnyAndIndexed) {
  Filter any = parse_ok("dim=768");
  EXPECT_TRUE(any.accepts(tensor("a", {1, 128, 768}), 0));
  EXPECT_FALSE(any.accepts(tensor("a", {1, 128, 512}), 0));
  EXPECT_FALSE(any.accepts(tensor("a", {}), 0));  // no dims at all
  Filter first = parse_ok("dim[0]=1");
  EXPECT_TRUE(first.accepts(tensor("a", {1, 5}), 0));
  EXPECT_FALSE(first.accepts(tensor("a", {5, 1}), 0));
  Filter last = parse_ok("dim[-1]>=512");
  EXPECT_TRUE(last.accepts(tensor("a", {1, 768}), 0));
  EXPECT_FALSE(last.accepts(tensor("a", {768, 1}), 0));
  EXPECT_FALSE(last.accepts(tensor("a", {}), 0));  // out of range index: false
  Filter third = parse_ok("dim[2]=3");
  EXPECT_FALSE(third.accepts(tensor("a", {3, 3}), 0));
  Filter big = parse_ok("dim>1000");
  EXPECT_TRUE(big.accepts(tensor("a", {2, 1001}), 0));
  EXPECT_FALSE(big.accepts(tensor("a", {1000, 1000}), 0));
}

TEST(Filter, EveryUsesTheWriterIndex) {
  Filter f = parse_ok("every=3");
  TensorInfo t = tensor("a");
  t.exec_index = 3;  // ignored: the argument counts
  EXPECT_TRUE(f.accepts(t, 0));
  EXPECT_FALSE(f.accepts(t, 1));
  EXPECT_FALSE(f.accepts(t, 2));
  EXPECT_TRUE(f.accepts(t, 3));
  EXPECT_TRUE(f.accepts(t, 300));
  Filter both = parse_ok("every=2 every=3");
  EXPECT_TRUE(both.accepts(t, 6));
  EXPECT_FALSE(both.accepts(t, 4));
  EXPECT_FALSE(both.accepts(t, 9));
}

TEST(Filter, BudgetUnits) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  const Case cases[] = {
      {"budget=123", 123},           {"budget=123B", 123},
      {"budget=2k", 2000},           {"budget=2kB", 2000},
      {"budget=3M", 3000000},        {"budget=3MB", 3000000},
      {"budget=1G", 1000000000},     {"budget=1GB", 1000000000},
      {"budget=1T", 1000000000000},  {"budget=4KiB", 4096},
      {"budget=64MiB", 64ull << 20}, {"budget=1.5GiB", 3ull << 29},
      {"budget=2TiB", 2ull << 40},   {"budget=0.5k", 500},
  };
  for (const auto& c : cases) {
    Filter f = parse_ok(c.text);
    ASSERT_TRUE(f.byte_budget()) << c.text;
    EXPECT_EQ(*f.byte_budget(), c.bytes) << c.text;
    EXPECT_TRUE(f.accepts(tensor("a"), 5)) << "budget is not part of accepts()";
    EXPECT_FALSE(f.empty());
  }
}

TEST(Filter, CombinationAllClausesMustHold) {
  Filter f = parse_ok(
      "encoder.layers.3* -*.dropout; op=Linear,LayerNorm; role=output; dtype=f16,f32; rank>=2; "
      "numel<=1M; dim[-1]=768; every=2; budget=64MiB");
  TensorInfo good = tensor("encoder.layers.31.fc", {1, 16, 768}, DType::f16, "Linear");
  EXPECT_TRUE(f.accepts(good, 4));
  EXPECT_FALSE(f.accepts(good, 5));  // every
  auto with = [&](auto mutate) {
    TensorInfo t = good;
    mutate(t);
    return f.accepts(t, 4);
  };
  EXPECT_FALSE(with([](TensorInfo& t) { t.name = "encoder.layers.4.fc"; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.name = "encoder.layers.3.dropout"; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.op_type = "GELU"; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.role = Role::input; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.dtype = DType::bf16; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.shape = {768}; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.shape = {2000, 768}; }));
  EXPECT_FALSE(with([](TensorInfo& t) { t.shape = {1, 768, 16}; }));
  EXPECT_EQ(*f.byte_budget(), 64ull << 20);
}

// Filters compile exact names, "prefix*" and "*suffix" to plain compares; whatever the path,
// a name clause must mean exactly what glob_match says.
TEST(Filter, CompiledGlobsAgreeWithGlobMatch) {
  const char* patterns[] = {"*", "**", "norm", "encoder.*", "*.dropout", "*.drop*", "a\\*",
                            "*a\\*", "*\\?", "x?z", "[ab]*", "*[0-9]", "\xC3\xA9*", "*\xC3\xA9"};
  const char* names[] = {"", "norm", "norm.x", "encoder.layers.1", "encoder", "l.dropout",
                         "l.dropout.x", "a*", "ab", "za*", "q?", "xyz", "bq", "layer7",
                         "\xC3\xA9t\xC3\xA9", "t\xC3\xA9"};
  for (const char* p : patterns) {
    Filter inc = parse_ok(std::string("+") + p);
    Filter exc = parse_ok(std::string("-") + p);
    for (const char* n : names) {
      EXPECT_EQ(inc.may_accept_name(n), glob_match(p, n)) << p << " vs " << n;
      EXPECT_EQ(exc.may_accept_name(n), !glob_match(p, n)) << p << " vs " << n;
    }
  }
}

// ---- canonical text ---------------------------------------------------------------------------

TEST(Filter, CanonicalToStringRoundTrips) {
  struct Case {
    const char* in;
    const char* canonical;
  };
  const Case cases[] = {
      {"  +a.*;;b  ", "a.* b"},
      {"!x -y", "-x -y"},
      {"budget=1KiB every=4 dim[-1]=3 dim!=0 numel>1k rank<=3 dtype=half role=input op=Add "
       "-z +a",
       "a -z op=Add role=input dtype=f16 rank<=3 numel>1000 dim[-1]=3 dim!=0 every=4 budget=1024"},
      {"role=parameter,output", "role=output,parameter"},
      {"dtype=u8,f32,f32", "dtype=f32,u8"},
      {"rank==2", "rank=2"},
      {"+rank=2", "+rank=2"},     // a name that looks like a clause keeps its '+'
      {"+-odd", "+-odd"},         // an include that starts with '-'
      {"+!odd", "+!odd"},
      {"a\\ b", "a\\ b"},         // escaped space stays one clause
      {"x\\;y", "x\\;y"},
      {"op=a\\,b,c", "op=a\\,b,c"},
  };
  for (const auto& c : cases) {
    Filter f = parse_ok(c.in);
    EXPECT_EQ(f.to_string(), c.canonical) << c.in;
    Filter again = parse_ok(f.to_string());
    EXPECT_EQ(again.to_string(), f.to_string()) << c.in;
  }
  EXPECT_TRUE(parse_ok("+rank=2").accepts(tensor("rank=2"), 0));
  EXPECT_FALSE(parse_ok("+rank=2").accepts(tensor("x", {1, 1}), 0));
  EXPECT_TRUE(parse_ok("a\\ b").accepts(tensor("a b"), 0));
  EXPECT_TRUE(parse_ok("op=a\\,b").accepts(tensor("n", {1}, DType::f32, "a,b"), 0));
}

// Random strings over the syntax's alphabet: parse never crashes, and whatever parses has a
// canonical text that parses back to itself and accepts exactly the same tensors.
TEST(Filter, RandomTextsRoundTripOrFailCleanly) {
  const std::string alphabet = "abdeklmnoprtuy0123456789=<>!+-*?[]^\\,;. _-\xC3\xA9";
  const std::vector<std::string> words = {"op=", "role=", "dtype=", "rank", "numel", "dim",
                                          "dim[-1]", "every=", "budget=", "output", "f16", "k",
                                          "MiB", "layers.", "*", "[0-3]", "\\ "};
  std::vector<TensorInfo> probes = {tensor("layers.3.fc", {1, 768}, DType::f16, "Linear"),
                                    tensor("a", {}, DType::i8, "", Role::input),
                                    tensor("layers.10", {3, 0}, DType::f32, "Norm", Role::parameter)};
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {  // SplitMix64: deterministic, so a failure reproduces
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  size_t parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const size_t len = next() % 24;
    for (size_t k = 0; k < len; ++k)
      text += next() % 3 == 0 ? words[next() % words.size()] : std::string(1, alphabet[next() % alphabet.size()]);
    auto f = Filter::parse(text);
    if (!f.ok()) {
      EXPECT_EQ(f.error().code, Errc::filter_syntax) << text;
      EXPECT_EQ(f.error().message.find('\n'), std::string::npos) << text;
      continue;
    }
    ++parsed;
    const std::string canon = f->to_string();
    auto again = Filter::parse(canon);
    ASSERT_TRUE(again.ok()) << text << " -> " << canon << ": " << again.error().to_string();
    EXPECT_EQ(again->to_string(), canon) << text;
    EXPECT_EQ(again->byte_budget(), f->byte_budget()) << text;
    for (const auto& t : probes)
      for (uint64_t idx : {0u, 1u, 6u})
        EXPECT_EQ(again->accepts(t, idx), f->accepts(t, idx)) << text << " -> " << canon;
  }
  EXPECT_GT(parsed, 2000u);  // the generator must exercise the success path too
}

TEST(Filter, CopyAndMoveKeepTheClauses) {
  Filter f = parse_ok("a* budget=10");
  Filter copy = f;
  Filter moved = std::move(f);
  EXPECT_EQ(copy.to_string(), "a* budget=10");
  EXPECT_EQ(moved.to_string(), "a* budget=10");
  EXPECT_FALSE(copy.accepts(tensor("b"), 0));
  copy = moved;
  EXPECT_EQ(*copy.byte_budget(), 10u);
}

// ---- syntax errors ----------------------------------------------------------------------------

TEST(Filter, SyntaxErrorsNameTheClauseAndColumn) {
  struct Case {
    const char* text;
    size_t column;        // 1-based column of the offending character
    const char* clause;   // the clause the message must quote
    size_t clause_column;
    const char* why;
  };
  const Case cases[] = {
      {"rank<=x", 7, "rank<=x", 1, "expected a number, found 'x'"},
      {"a.* rank<=x", 11, "rank<=x", 5, "expected a number, found 'x'"},
      {"a foo=3", 3, "foo=3", 3, "unknown key 'foo'"},
      {"dtype=f33", 7, "dtype=f33", 1, "unknown dtype 'f33'"},
      {"dtype=f32,,f16", 11, "dtype=f32,,f16", 1, "empty list item"},
      {"role=outptu", 6, "role=outptu", 1, "unknown role 'outptu'"},
      {"op=", 4, "op=", 1, "missing value after 'op='"},
      {"every=0", 7, "every=0", 1, "every=N needs N >= 1"},
      {"every<3", 6, "every<3", 1, "'every' takes '=', not '<'"},
      {"budget=12XB", 10, "budget=12XB", 1, "unknown unit 'XB'"},
      {"budget=1 budget=2", 10, "budget=2", 10, "budget given twice"},
      {"numel>1.5", 7, "numel>1.5", 1, "value is not a whole number"},
      {"numel>3x", 8, "numel>3x", 1, "unknown suffix 'x'"},
      {"rank>3k", 7, "rank>3k", 1, "unexpected 'k' after the number"},
      {"rank=99999999999999999999999", 6, "rank=99999999999999999999999", 1, "number out of range"},
      {"budget=99999999999TiB", 8, "budget=99999999999TiB", 1, "number out of range"},
      {"dim[x]=3", 5, "dim[x]=3", 1, "dim index 'x' is not an integer"},
      {"dim[16]=3", 5, "dim[16]=3", 1, "dim index '16' is not an integer in -16..15"},
      {"rank[0]=1", 5, "rank[0]=1", 1, "'rank' takes no [index]"},
      {"layers.[0-3", 8, "layers.[0-3", 1, "unterminated character class"},
      {"layers.[3-0]", 9, "layers.[3-0]", 1, "reversed range '3-0' in character class"},
      {"x -", 4, "-", 3, "empty pattern"},
      {"+", 2, "+", 1, "empty pattern"},
      {"a\\", 2, "a\\", 1, "dangling '\\' at the end of the pattern"},
      {"a op=[a", 6, "op=[a", 3, "unterminated character class"},
  };
  for (const auto& c : cases) {
    auto f = Filter::parse(c.text);
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_EQ(f.error().code, Errc::filter_syntax) << c.text;
    const std::string& m = f.error().message;
    const std::string head = "filter column " + std::to_string(c.column) + ": " + c.why;
    const std::string tail = std::string("(in clause '") + c.clause + "' at column " +
                             std::to_string(c.clause_column) + ")";
    EXPECT_EQ(m.rfind(head, 0), 0u) << c.text << " -> " << m;
    EXPECT_NE(m.find(tail), std::string::npos) << c.text << " -> " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace driftscope
