// Dump sets (docs/dumpsets.md): the annotation grammar (§4) and manifest validation (§2),
// hostile inputs included. Every rejection is asserted by its code and the key it names.
#include <gtest/gtest.h>

#include <string>

#include "driftscope/dumpset.hpp"

namespace {

using namespace driftscope;

TEST(AxisAnnotation, SplitPartialAndBase) {
  auto a = parse_axis_annotation("hidden@tp");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->base, "hidden");
  EXPECT_EQ(a->split, "tp");
  EXPECT_TRUE(a->partial.empty());
  auto b = parse_axis_annotation("out+tp+dp+tp");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->base, "out");
  EXPECT_EQ(b->partial, (std::vector<std::string>{"tp", "dp"}));
  auto c = parse_axis_annotation("seq@sp+tp");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->split, "sp");
  EXPECT_EQ(c->partial, std::vector<std::string>{"tp"});
  auto plain = parse_axis_annotation("batch");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->base, "batch");
  EXPECT_EQ(axis_base("hidden@tp"), "hidden");
  EXPECT_EQ(axis_base("@@"), "@@");  // unparsable: the name itself
}

TEST(AxisAnnotation, HostileStringsAreBadAxes) {
  for (const char* s : {"@tp", "+tp", "x@", "x+", "x@1tp", "x@t-p", "x@tp@dp", "x@tp+tp", "x@ tp",
                        "x@tp\n", "x@\xc3\xa9", "", "x@@tp"}) {
    auto a = parse_axis_annotation(s);
    ASSERT_FALSE(a.ok()) << s;
    EXPECT_EQ(a.error().code, Errc::bad_axes) << s;
    EXPECT_EQ(a.error().message.find('\n'), std::string::npos) << s;
  }
  std::string longest(100000, 'a');
  EXPECT_TRUE(parse_axis_annotation("x@" + longest).error().code == Errc::bad_axes ||
              parse_axis_annotation("x@" + longest).ok());
}

TEST(ShardSpec, RecordRules) {
  auto s = parse_shard_spec({"batch", "seq@sp", "hidden@tp"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->split.size(), 2u);
  EXPECT_EQ(s->split[0], (std::pair<std::string, uint32_t>{"sp", 1}));
  EXPECT_EQ(s->split[1], (std::pair<std::string, uint32_t>{"tp", 2}));
  EXPECT_EQ(s->base_axes, (std::vector<std::string>{"batch", "seq", "hidden"}));
  auto p = parse_shard_spec({"batch", "hidden+tp"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->partial, std::vector<std::string>{"tp"});
  EXPECT_TRUE(p->sharded());
  EXPECT_FALSE(parse_shard_spec({"a", "b"})->sharded());
  EXPECT_EQ(parse_shard_spec({"a@tp", "b@tp"}).error().code, Errc::bad_axes);   // one axis per group
  EXPECT_EQ(parse_shard_spec({"a@tp", "b+tp"}).error().code, Errc::bad_axes);   // split and partial
}

std::string manifest(const std::string& ranks = R"([{"rank": 0, "file": "r0.tdump", "coords": {"tp": 0, "pp": 0}},
  {"rank": 1, "file": "r1.tdump", "coords": {"tp": 1, "pp": 0}},
  {"rank": 2, "file": "r2.tdump", "coords": {"tp": 0, "pp": 1}},
  {"rank": 3, "file": "r3.tdump", "coords": {"tp": 1, "pp": 1}}])",
                     const std::string& head = R"("format": "driftscope.set/1", "world_size": 4, "groups": {"tp": 2, "pp": 2}, "order": "pipeline")") {
  return "{" + head + ", \"ranks\": " + ranks + ", \"metadata\": {\"model\": \"m\", \"n\": 3}}";
}

TEST(Manifest, ValidSetKeepsGroupOrderAndCoords) {
  auto s = DumpSet::parse_manifest(manifest(), "/d");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->world_size, 4u);
  ASSERT_EQ(s->groups.size(), 2u);
  EXPECT_EQ(s->groups[0].first, "tp");  // manifest order, not sorted
  EXPECT_EQ(s->order, SetOrder::pipeline);
  EXPECT_EQ(s->ranks[2].path, "/d/r2.tdump");
  EXPECT_EQ(s->coords_text(2), "tp=0,pp=1");
  EXPECT_EQ(s->metadata, (KeyValues{{"model", "m"}, {"n", "3"}}));
}

struct Bad {
  std::string text;
  Errc code;
  std::string needle;
};

TEST(Manifest, RejectionsNameTheKey) {
  const std::string ok_head = R"("format": "driftscope.set/1", "world_size": 4, "groups": {"tp": 2, "pp": 2}, "order": "pipeline")";
  auto two = [](const std::string& r0, const std::string& r1) {
    return R"({"format": "driftscope.set/1", "world_size": 2, "groups": {"tp": 2}, "order": "lockstep", "ranks": [)" +
           r0 + "," + r1 + "]}";
  };
  const std::string r1 = R"({"rank": 1, "file": "b", "coords": {"tp": 1}})";
  const Bad cases[] = {
      {"{\n\"format\": 1,\n  ]", Errc::bad_value, ":3:3"},
      {"[]", Errc::bad_value, "(top level)"},
      {"", Errc::bad_value, "invalid JSON"},
      {R"({"format": "driftscope.set/2"})", Errc::unsupported_version, "'format'"},
      {R"({"format": "driftscope.set/1", "world_size": 99999999999})", Errc::limit_exceeded, "'world_size'"},
      {R"({"format": "driftscope.set/1", "world_size": -1})", Errc::bad_value, "'world_size'"},
      {R"({"format": "driftscope.set/1", "world_size": 0})", Errc::bad_value, "'world_size'"},
      {R"({"format": "driftscope.set/1", "world_size": 2, "groups": {"t p": 2}})", Errc::bad_value, "'groups.t p'"},
      {R"({"format": "driftscope.set/1", "world_size": 2, "groups": {"tp": 3}})", Errc::bad_value, "'groups'"},
      {R"({"format": "driftscope.set/1", "world_size": 4, "groups": {"tp": 2}})", Errc::bad_value, "product"},
      {R"({"format": "driftscope.set/1", "world_size": 1, "groups": {}, "order": "lockstep", "ranks": []})", Errc::bad_value, "'ranks'"},
      {R"({"format": "driftscope.set/1", "world_size": 2, "groups": {"tp": 2}, "order": "pipeline"})", Errc::bad_value, "'order'"},
      {two(R"({"rank": 1, "file": "a", "coords": {"tp": 0}})", r1), Errc::bad_value, "'ranks[1].rank'"},
      {two(R"({"rank": 2, "file": "a", "coords": {"tp": 0}})", r1), Errc::bad_value, "'ranks[0].rank'"},
      {two(R"({"rank": 0, "file": "x/../../a", "coords": {"tp": 0}})", r1), Errc::bad_value, "'ranks[0].file'"},
      {two(R"({"rank": 0, "file": "/abs", "coords": {"tp": 0}})", r1), Errc::bad_value, "'ranks[0].file'"},
      {two(R"({"rank": 0, "file": "a\u0000b", "coords": {"tp": 0}})", r1), Errc::bad_value, "NUL"},
      {two(R"({"rank": 0, "file": "b", "coords": {"tp": 0}})", r1), Errc::bad_value, "two ranks"},
      {two(R"({"rank": 0, "file": "a", "coords": {}})", r1), Errc::bad_value, "'ranks[0].coords.tp'"},
      {two(R"({"rank": 0, "file": "a", "coords": {"tp": 1}})", r1), Errc::bad_value, "'ranks[1].coords'"},
      {two(R"({"rank": 0, "file": "a", "coords": {"tp": 0, "dp": 0}})", r1), Errc::bad_value, "'ranks[0].coords.dp'"},
      {R"({"format": "driftscope.set/1", "format": "x"})", Errc::duplicate_key, "twice"},
      {std::string(1000, '[') + std::string(1000, ']'), Errc::limit_exceeded, "nested"},
  };
  for (const Bad& c : cases) {
    auto s = DumpSet::parse_manifest(c.text, "/d");
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.error().code, c.code) << c.text << " -> " << s.error().to_string();
    EXPECT_NE(s.error().message.find(c.needle), std::string::npos) << s.error().message;
    EXPECT_EQ(s.error().message.find('\n'), std::string::npos) << s.error().message;
  }
  auto big = DumpSet::parse_manifest(std::string(kMaxManifestBytes + 1, ' '), "/d");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, Errc::limit_exceeded);
}

TEST(Manifest, HugeWorldSizeWithFewRanksAllocatesNothing) {
  // world_size at the cap, one rank entry: refused by the count before any per-rank vector.
  auto s = DumpSet::parse_manifest(
      R"({"format": "driftscope.set/1", "world_size": 4096, "groups": {"dp": 4096}, "order": "lockstep", "ranks": [{"rank": 0}]})",
      "/d");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("has 1 entries, world_size is 4096"), std::string::npos) << s.error().message;
}

// The manifest parser builds its document from SAX events (issue 23 item 4: nlohmann's callback
// parser and ordered_json's keyed inserts were quadratic). Every message is pinned as the
// callback parser gave it: syntax errors with line:column, number overflow, the depth limit at
// the same level, duplicates found in nested objects, a syntax error reported before a duplicate.
std::string nest(int n, const std::string& open, const std::string& close, const std::string& inner = "") {
  std::string s;
  for (int i = 0; i < n; ++i) s += open;
  s += inner;
  for (int i = 0; i < n; ++i) s += close;
  return s;
}

TEST(Manifest, ParserMessagesAreUnchanged) {
  const std::string at = "/d/driftscope-set.json";
  const std::string top = at + ": key '(top level)': is not a JSON object";
  const std::string no_format = at + ": key 'format': missing; expected \"driftscope.set/1\"";
  const std::string nested = at + ": nested deeper than 64 levels";
  const std::pair<std::string, std::string> cases[] = {
      {"", at + ":1:1: invalid JSON: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"},
      {"{", at + ":1:2: invalid JSON: syntax error while parsing object key - unexpected end of input; expected string literal"},
      {"[1,]", at + ":1:4: invalid JSON: syntax error while parsing value - unexpected ']'; expected '[', '{', or a literal"},
      {"{\"a\":1,}", at + ":1:8: invalid JSON: syntax error while parsing object key - unexpected '}'; expected string literal"},
      {"{\"a\" 1}", at + ":1:6: invalid JSON: syntax error while parsing object separator - unexpected number literal; expected ':'"},
      {"1e999", at + ": invalid JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
      {"{\"a\":\"\xff\"}", at + ":1:7: invalid JSON: syntax error while parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"\\xff'"},
      {"{}\n\n  x", at + ":3:3: invalid JSON: syntax error while parsing value - invalid literal; last read: '{}<U+000A><U+000A>  x'; expected end of input"},
      {"/* c */ {}", at + ":1:1: invalid JSON: syntax error while parsing value - invalid literal; last read: '/'"},
      {"{\"a\": {\"b\": 1, \"b\": 2}, \"a\": 3}", at + ": key 'b' appears twice in one object"},
      {"{\"a\": {\"b\": 1, \"b\": 2}, \"c\": [1,}", at + ":1:33: invalid JSON: syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal"},
      {"3", top},
      {nest(65, "[", "]"), top},                          // 65 levels, nothing inside the last
      {nest(66, "[", "]"), nested},
      {nest(64, "[", "]", "1"), top},
      {nest(65, "[", "]", "1"), nested},
      {nest(64, "{\"k\":", "}", "{}"), no_format},
      {nest(64, "{\"k\":", "}", "1"), no_format},
      {nest(65, "{\"k\":", "}", "1"), nested},
      {nest(64, "{\"k\":", "}", "{\"a\":1,\"a\":2}"), nested},  // the first problem is named
      {nest(1000, "[", ""), at + ":1:1001: invalid JSON: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"},
  };
  for (const auto& [text, message] : cases) {
    auto s = DumpSet::parse_manifest(text, "/d");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.error().message, message) << text;
  }
}

// Many metadata keys and many ranks, in orders unlike their sorted ones: the metadata keeps the
// manifest's order and values (strings as they are, other JSON as written), each rank lands at
// its number, and a duplicate found at the far end of a large object is still refused.
TEST(Manifest, LargeObjectsKeepOrderAndDuplicatesAreFound) {
  const uint32_t n = 4096;
  std::string ranks = "[";
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = (i * 2377) % n;  // 2377 is odd: a permutation of 0..4095
    ranks += (i ? "," : "") + std::string("{\"coords\": {\"dp\": ") + std::to_string(r) + "}, \"file\": \"f" +
             std::to_string(r) + "\", \"rank\": " + std::to_string(r) + "}";
  }
  ranks += "]";
  std::string meta = "{";
  KeyValues want;
  for (uint32_t i = 0; i < 3000; ++i) {
    const std::string k = "k" + std::to_string((i * 7919) % 3000);
    const bool text = i % 2;
    meta += (i ? "," : "") + ("\"" + k + "\": ") + (text ? "\"v" + std::to_string(i) + "\"" : "[" + std::to_string(i) + ",null]");
    want.emplace_back(k, text ? "v" + std::to_string(i) : "[" + std::to_string(i) + ",null]");
  }
  const std::string head = R"({"format": "driftscope.set/1", "world_size": 4096, "groups": {"dp": 4096}, "order": "lockstep", "ranks": )";
  auto s = DumpSet::parse_manifest(head + ranks + ", \"metadata\": " + meta + "}}", "/d");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_EQ(s->ranks.size(), n);
  for (uint32_t r = 0; r < n; ++r) {
    EXPECT_EQ(s->ranks[r].rank, r);
    EXPECT_EQ(s->ranks[r].file, "f" + std::to_string(r));
    EXPECT_EQ(s->ranks[r].coords, std::vector<uint32_t>{r});
  }
  EXPECT_EQ(s->metadata, want);
  auto dup = DumpSet::parse_manifest(head + ranks + ", \"metadata\": " + meta + ", \"k0\": 1}}", "/d");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, Errc::duplicate_key);
  EXPECT_EQ(dup.error().message, "/d/driftscope-set.json: key 'k0' appears twice in one object");
}

}  // namespace
