// What the speed and memory work of issue 13 §5 must not change: reports identical for any thread
// count (fused checksums, page release), damaged payloads still caught, the streamed JSON exactly
// what nlohmann's dump of the same document gives, and a report of many records complete.
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "compare/report_access.hpp"
#include "compare_test_util.hpp"

using namespace ds_test;

namespace {

std::string json_of(const Report& r, int indent = 2) { return report_to_json(r, indent); }

// Many small pairs (some failing, one with NaN, one renamed, one permuted) and one pair large
// enough to run alone across threads in several kernel tasks.
std::vector<Entry> mixed(bool candidate) {
  std::vector<Entry> e;
  for (int i = 0; i < 120; ++i) {
    auto v = noise(static_cast<size_t>(1 + (i * 37) % 300), static_cast<uint64_t>(i));
    if (candidate && i % 7 == 3)
      for (auto& x : v) x *= 1.01;
    e.push_back({"blocks." + std::to_string(i) + ".out", v});
  }
  auto nan = noise(50, 999);
  if (candidate) nan[17] = std::nan("");
  e.push_back({"with_nan", nan});
  Entry perm{"attn.scores", noise(6 * 4, 5), {6, 4}};
  perm.axes = {"seq", "heads"};
  if (candidate) {
    std::vector<double> t(24);
    for (size_t s = 0; s < 6; ++s)
      for (size_t h = 0; h < 4; ++h) t[h * 6 + s] = perm.values[s * 4 + h];
    perm.values = t;
    perm.shape = {4, 6};
    perm.axes = {"heads", "seq"};
  }
  e.push_back(perm);
  auto big = noise(size_t{3} << 20, 77);  // 3 Mi elements: 12 kernel tasks
  if (candidate)
    for (size_t i = 0; i < big.size(); i += 4099) big[i] += 1e-3;
  e.push_back({"lm_head.logits", big, {big.size() / 1024, 1024}});
  return e;
}

}  // namespace

TEST(Scale, ReportIdenticalForAnyThreadCount) {
  ScratchDir d;
  auto a = write_dump(d.file("a.tdump"), mixed(false));
  auto b = write_dump(d.file("b.tdump"), mixed(true));
  CompareOptions o;
  o.threads = 1;
  const std::string one = json_of(run_compare(a, b, o));
  for (unsigned t : {2u, 3u, 8u}) {
    o.threads = t;
    EXPECT_EQ(json_of(run_compare(a, b, o)), one) << t << " threads";
  }
  // The same readers compared in memory (no page release) give the same report too.
  auto ra = Reader::open(a), rb = Reader::open(b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  o.threads = 4;
  auto mem = compare(*ra, *rb, o);
  ASSERT_TRUE(mem.ok());
  mem->reference.path = a;
  mem->candidate.path = b;
  EXPECT_EQ(json_of(*mem), one);
  EXPECT_NE(one.find("\"lm_head.logits\""), std::string::npos);
}

// The kernel checksums a large payload in pieces on several threads: one flipped bit in the
// middle is still a read error, with the message Reader::verify_payload gives.
TEST(Scale, DamagedLargePayloadIsAReadError) {
  ScratchDir d;
  auto v = noise(size_t{2} << 20, 3);
  auto a = write_dump(d.file("a.tdump"), {{"x", v}, {"big", v}});
  auto b = write_dump(d.file("b.tdump"), {{"x", v}, {"big", v}});
  uint64_t at = 0;
  std::string expected;
  {
    auto r = Reader::open(b);
    ASSERT_TRUE(r.ok());
    at = r->find("big")->payload_offset + (size_t{3} << 20) + 1;
  }
  {
    std::FILE* f = std::fopen(b.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    std::fputc(c ^ 0x01, f);
    std::fclose(f);
  }
  {
    OpenOptions lazy;
    lazy.verify = Verify::frames;
    auto r = Reader::open(b, lazy);
    ASSERT_TRUE(r.ok());
    auto bad = r->verify_payload(*r->find("big"));
    ASSERT_FALSE(bad.ok());
    expected = "candidate: " + bad.error().to_string();
  }
  for (unsigned t : {1u, 4u}) {
    CompareOptions o;
    o.threads = t;
    Report r = run_compare(a, b, o);
    ASSERT_EQ(r.pairs.size(), 2u);
    EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
    EXPECT_EQ(r.pairs[1].status, PairStatus::incomparable);
    ASSERT_FALSE(r.pairs[1].reasons().empty());
    EXPECT_EQ(r.pairs[1].reasons()[0].code(), "read_error");
    EXPECT_EQ(r.pairs[1].reasons()[0].message, expected);
  }
}

// The report is written straight to text (report/json_writer.hpp); it must be what nlohmann
// gives for the parsed document, in both layouts, strings that need escaping included.
TEST(Scale, JsonTextIsNlohmannsDump) {
  ScratchDir d;
  auto ref = mixed(false);
  auto cand = mixed(true);
  ref.push_back({"quote\"back\\slash\ttab", noise(8, 1)});
  cand.push_back({"quote\"back\\slash\ttab", noise(8, 2)});
  ref.push_back({"caf\xc3\xa9.\xe2\x86\x92.\x7f", noise(8, 1)});
  cand.push_back({"caf\xc3\xa9.\xe2\x86\x92.\x7f", noise(8, 1)});
  ref.push_back({"only.ref", noise(3, 1)});
  cand.push_back({"only.cand", noise(3, 1)});
  Report r = run_compare(write_dump(d.file("a.tdump"), ref), write_dump(d.file("b.tdump"), cand));
  for (int indent : {2, 0, 4, -1}) {
    const std::string text = json_of(r, indent);
    const auto doc = nlohmann::ordered_json::parse(text);
    EXPECT_EQ(text, doc.dump(indent) + "\n") << "indent " << indent;
    EXPECT_EQ(doc["tensors"].size(), r.pairs.size());
  }
}

// A long "tensors" array is formatted on a helper thread while the sink writes (report_json.cpp
// Emitter::pipelined): the text is still nlohmann's dump, runs of pairs sharing criteria reuse
// one criteria text (CriteriaText), and a sink that fails stops it with that error.
TEST(Scale, PipelinedJsonIsTheDocumentDump) {
  ScratchDir d;
  std::vector<Entry> ref, cand;
  for (size_t i = 0; i < 5000; ++i) {
    // Names that need escaping among plain ones; -0.0, repeated values and one NaN.
    std::string name = i % 97 == 5 ? "l.\"" + std::to_string(i) + "\xc3\xa9\t" : "l." + std::to_string(i);
    std::vector<double> v = {1.0 + static_cast<double>(i % 13), -0.0, 0.5, static_cast<double>(i)};
    auto w = v;
    if (i % 3 == 0) w[0] += 1e-3;
    if (i == 4321) w[2] = std::nan("");
    ref.push_back({name, v});
    cand.push_back({name, w});
  }
  CompareOptions o;
  // Criteria that change in runs and back: l.1* by one rule, l.2* by another, the rest by default.
  PolicyRule a;
  a.match = "l.1*";
  a.criteria = Criteria{};
  a.criteria->min_cosine = 0.999;
  PolicyRule b;
  b.match = "l.2*";
  b.criteria = Criteria{};
  b.criteria->atol = 1e-4;
  b.criteria->rtol = 0.0;
  o.policy.rules = {a, b};
  Report r = run_compare(write_dump(d.file("a.tdump"), ref), write_dump(d.file("b.tdump"), cand), o);
  ASSERT_EQ(r.pairs.size(), 5000u);
  for (int indent : {2, -1}) {
    std::string pieces;
    auto res = report_to_json(r, indent, [&](std::string_view s) -> Result<void> {
      pieces.append(s);
      return {};
    });
    ASSERT_TRUE(res.ok());
    const auto doc = nlohmann::ordered_json::parse(pieces);
    EXPECT_EQ(pieces, doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")
        << "indent " << indent;
    ASSERT_EQ(doc["tensors"].size(), r.pairs.size());
    size_t texts = 0;
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      EXPECT_EQ(doc["tensors"][i]["pair"], i);
      const auto& c = doc["tensors"][i]["criteria"];
      if (c.is_null()) continue;
      EXPECT_EQ(c["text"], r.pairs[i].criteria().to_string()) << "pair " << i;
      ++texts;
    }
    EXPECT_EQ(texts, r.pairs.size());
  }
  // The second chunk of "tensors" (256 pairs, ~700 KB) fails: nothing more reaches the sink, the
  // helper thread stops, the error comes back.
  size_t chunks = 0, after = 0;
  auto res = report_to_json(r, 2, [&](std::string_view s) -> Result<void> {
    if (chunks == 2) ++after;
    if (s.size() >= (size_t{100} << 10) && ++chunks == 2) return make_error(Errc::io_error, "disk full");
    return {};
  });
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message, "disk full");
  EXPECT_EQ(chunks, 2u);
  EXPECT_EQ(after, 0u);
}

// A report of many records is complete: every pair once, in order (read without a DOM; compact,
// to keep the file small: the layouts are the same document, JsonTextIsNlohmannsDump).
TEST(Scale, JsonOfManyRecordsHasEveryPair) {
  constexpr size_t kRecords = 100000;
  ScratchDir d;
  for (const char* side : {"a.tdump", "b.tdump"}) {
    auto w = Writer::create(d.file(side));
    ASSERT_TRUE(w.ok());
    float v[2] = {1.0f, side[0] == 'a' ? 2.0f : 2.5f};
    for (size_t i = 0; i < kRecords; ++i) {
      TensorInfo t;
      t.name = "l" + std::to_string(i);
      t.dtype = DType::f32;
      t.shape = {2};
      ASSERT_TRUE((*w)->write(t, std::as_bytes(std::span<const float>(v))).ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  Report r = run_compare(d.file("a.tdump"), d.file("b.tdump"));
  ASSERT_EQ(r.pairs.size(), kRecords);
  const std::string path = d.file("r.json");
  {
    std::ofstream out(path, std::ios::binary);
    auto ok = report_to_json(r, -1, [&](std::string_view s) -> Result<void> {
      out.write(s.data(), static_cast<std::streamsize>(s.size()));
      return {};
    });
    ASSERT_TRUE(ok.ok());
  }
  // Counts the "pair" members of the objects directly inside "tensors" and checks they run 0..n-1.
  struct Sax : nlohmann::json_sax<nlohmann::json> {
    int depth = 0;
    bool in_tensors = false, want_pair = false, top_key_tensors = false;
    size_t next = 0;
    bool ordered = true;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t v) override {
      if (want_pair) ordered &= v == next++;
      want_pair = false;
      return true;
    }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth, true; }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override {
      if (depth == 1 && top_key_tensors) in_tensors = true;
      return ++depth, true;
    }
    bool end_array() override {
      if (--depth == 1) in_tensors = false;
      return true;
    }
    bool key(string_t& k) override {
      if (depth == 1) top_key_tensors = k == "tensors";
      want_pair = in_tensors && depth == 3 && k == "pair";
      return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
      return false;
    }
  } sax;
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(nlohmann::json::sax_parse(in, &sax));
  EXPECT_EQ(sax.next, kRecords);
  EXPECT_TRUE(sax.ordered);
}

namespace {

// Pairing reads identities from the readers' tables when a side has no filter or rename rule and
// decodes metas in parallel blocks of 4,096 records otherwise: both ways, and any thread count,
// pair alike. 10,000 records per side span three blocks, with duplicate identities (the first
// wins) and unpaired tensors on both sides across block boundaries.
TEST(Scale, PairingFromTablesOrDecodedBlocksIsTheSame) {
  std::vector<Entry> ref, cand;
  for (int i = 0; i < 10000; ++i) {
    const std::string name = "t." + std::to_string(i % 9000);  // 1,000 repeats: occurrence 1
    auto v = noise(4, static_cast<uint64_t>(i));
    if (i % 4001 != 17) ref.push_back({name, v});
    if (i % 3989 != 5) {
      if (i % 501 == 3) v[1] += 0.5;
      cand.push_back({i % 2999 == 11 ? "x." + name : name, v});
    }
  }
  // A duplicate identity on each side (same name and occurrence written twice), one block apart.
  Entry dup{"t.7", noise(4, 1)};
  dup.occurrence = 0;
  ref.push_back(dup);
  cand.push_back(dup);
  ScratchDir d;
  auto a = write_dump(d.file("a.tdump"), ref);
  auto b = write_dump(d.file("b.tdump"), cand);
  CompareOptions o;
  o.threads = 1;
  const Report base = run_compare(a, b, o);
  ASSERT_GT(base.pairs.size(), 9000u);
  ASSERT_FALSE(base.only_in_reference.empty());
  ASSERT_FALSE(base.only_in_candidate.empty());
  const std::string one = json_of(base);
  // A pair's two equal names are one block (detail/shared_string.hpp; 96 bytes a pair at a million).
  auto names_shared = [](const Report& r) {
    size_t shared = 0, renamed = 0;
    for (const PairResult& p : r.pairs) {
      if (p.ref.name() != p.cand.name()) ++renamed;
      else if (detail::ReportAccess::name(p.ref).shares_with(detail::ReportAccess::name(p.cand))) ++shared;
    }
    return std::pair{shared, renamed};
  };
  EXPECT_EQ(names_shared(base), std::pair(base.pairs.size(), size_t{0}));
  for (unsigned t : {1u, 2u, 3u}) {
    o.threads = t;
    o.filter.clear();
    EXPECT_EQ(json_of(run_compare(a, b, o)), one) << t << " threads, from the tables";
    o.filter = "*";  // accepts everything, but the metas are decoded
    EXPECT_EQ(json_of(run_compare(a, b, o)), one) << t << " threads, decoded";
  }
  // A rename rule on the candidate only: x.t.N pairs with t.N, the rest as before.
  o.filter.clear();
  o.names.candidate.push_back(*RenameRule::parse("^x\\.(.*)=>$1"));
  const Report renamed_report = run_compare(a, b, o);
  const auto [shared, renamed_pairs] = names_shared(renamed_report);
  EXPECT_GT(renamed_pairs, 0u);
  EXPECT_EQ(shared + renamed_pairs, renamed_report.pairs.size());
  o.filter = "*";
  EXPECT_EQ(names_shared(run_compare(a, b, o)), std::pair(shared, renamed_pairs)) << "decoded";
  o.filter.clear();
  const std::string renamed = json_of(renamed_report);
  EXPECT_NE(renamed, one);
  for (unsigned t : {1u, 3u}) {
    o.threads = t;
    o.filter = t == 1 ? "" : "*";
    EXPECT_EQ(json_of(run_compare(a, b, o)), renamed) << t << " threads, renamed";
  }
}

}  // namespace

namespace {

// Pairing trusts 64-bit identity hashes (fnv1a64 of the name, mixed with occurrence and role)
// and compares a pair's names afterwards; a mismatch pairs again comparing names as it goes.
// These two names share their fnv1a64 (found by Pollard's rho): the candidate holds the
// impostor first, so the hash alone would pair the reference's tensor with it.
TEST(Scale, TwoNamesOfOneHashArePairedByName) {
  const std::string a = "ne22f562d0ab41468", b = "nd737633291390751";
  ScratchDir d;
  auto ref = write_dump(d.file("r.tdump"), {{a, noise(4, 1)}, {"x", noise(4, 2)}});
  auto cand = write_dump(d.file("c.tdump"), {{b, noise(4, 3)}, {a, noise(4, 1)}, {"x", noise(4, 2)}});
  for (std::string filter : {"", "*"}) {
    CompareOptions o;
    o.filter = filter;
    const Report r = run_compare(ref, cand, o);
    ASSERT_EQ(r.pairs.size(), 2u) << filter;
    EXPECT_EQ(r.pairs[0].ref.name(), a);
    EXPECT_EQ(r.pairs[0].cand.name(), a);
    EXPECT_EQ(r.pairs[0].status, PairStatus::pass);
    ASSERT_EQ(r.only_in_candidate.size(), 1u);
    EXPECT_EQ(r.only_in_candidate[0].name(), b);
    EXPECT_TRUE(r.only_in_reference.empty());
  }
  // Only the impostor on the other side: nothing pairs with it.
  auto lone = write_dump(d.file("l.tdump"), {{b, noise(4, 1)}, {"x", noise(4, 2)}});
  const Report r = run_compare(ref, lone);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].ref.name(), "x");
  ASSERT_EQ(r.only_in_reference.size(), 1u);
  EXPECT_EQ(r.only_in_reference[0].name(), a);
}

}  // namespace
