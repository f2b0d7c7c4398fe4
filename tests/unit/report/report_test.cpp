// Rendering: JSON spells infinities and undefined values without breaking JSON, Markdown escapes
// table cells, the text report honours colour and width, incomparable pairs carry reasons.
#include <nlohmann/json.hpp>

#include "unit/compare/compare_test_util.hpp"
#include "compare/report_access.hpp"

namespace {

using namespace ds_test;

TEST(ReportJson, InfinitiesAndNullsAreValidJson) {
  ScratchDir d;
  auto v = noise(16, 1);
  auto n = v;
  n[0] = std::nan("");
  Report r = run_compare(write_dump(d.file("a.tdump"), {{"same", v}, {"bad", v}, {"shape", v, {4, 4}}}),
                         write_dump(d.file("b.tdump"), {{"same", v}, {"bad", n}, {"shape", noise(8, 1)}}));
  auto j = nlohmann::json::parse(report_to_json(r));
  EXPECT_EQ(j["schema"], "driftscope.compare.report/1");
  EXPECT_EQ(j["verdict"], "silent_failure");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["tensors"][0]["sqnr_db"], "inf");  // identical: infinite SQNR
  EXPECT_EQ(j["tensors"][0]["first_mismatch_index"], nullptr);
  EXPECT_EQ(j["tensors"][1]["error"], "inf");
  EXPECT_EQ(j["tensors"][1]["reasons"][0]["code"], "nonfinite");
  EXPECT_EQ(j["tensors"][2]["status"], "incomparable");
  EXPECT_EQ(j["tensors"][2]["cosine"], nullptr);
  EXPECT_EQ(j["tensors"][2]["criteria"], nullptr);
  ASSERT_EQ(j["incomparable"].size(), 1u);
  EXPECT_EQ(j["incomparable"][0]["reasons"][0]["code"], "shape");
  EXPECT_EQ(j["first_nonfinite"]["name"], "bad");
  EXPECT_EQ(j["first_divergence"]["name"], "bad");
  EXPECT_EQ(j["counts"]["incomparable"], 1);
  EXPECT_EQ(j["reference"]["state"], "clean");
  // Compact form for machines (the C ABI's output).
  EXPECT_EQ(report_to_json(r, -1).find('\n'), report_to_json(r, -1).size() - 1);
}

// The report is streamed member by member and pair by pair (issue 7, bug 16); the text must be
// exactly what rendering the whole document at once gives, for every indent, with every section
// non-empty (unpaired, incomparable, growth, amplifiers, warnings, metadata) and hostile names.
TEST(ReportJson, StreamedTextIsTheDocumentDump) {
  ScratchDir d;
  auto v = noise(64, 1);
  auto n = v;
  n[3] = std::nan("");
  auto w = v;
  for (auto& x : w) x *= 1.5;
  Report r = run_compare(
      write_dump(d.file("a.tdump"), {{"in", v}, {"l\n1\"\x01", v}, {"l2", v}, {"amp", v},
                                     {"shape", v, {8, 8}}, {"only_a", v}},
                 {{"framework", "x\ny"}, {"precision", "float32"}}),
      write_dump(d.file("b.tdump"), {{"in", v}, {"l\n1\"\x01", n}, {"l2", w}, {"amp", w},
                                     {"shape", noise(32, 1)}, {"only_b", v}}));
  ASSERT_FALSE(r.pairs.empty());
  ASSERT_FALSE(r.only_in_reference.empty());
  ASSERT_FALSE(r.incomparable.empty());
  r.warnings.push_back("a warning with \"quotes\" and a\nnewline");
  for (int indent : {-1, 0, 1, 2, 4}) {
    std::string text = report_to_json(r, indent);
    auto doc = nlohmann::ordered_json::parse(text);
    EXPECT_EQ(text, doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")
        << "indent " << indent;
    std::string pieces;
    size_t calls = 0;
    auto res = report_to_json(r, indent, [&](std::string_view s) -> Result<void> {
      pieces.append(s);
      ++calls;
      return {};
    });
    EXPECT_TRUE(res);
    EXPECT_EQ(pieces, text);
    EXPECT_GT(calls, 10u);  // streamed, not one string at the end
  }
  // A failing sink stops the rendering and its error comes back.
  size_t calls = 0;
  auto res = report_to_json(r, 2, [&](std::string_view) -> Result<void> {
    ++calls;
    return make_error(Errc::io_error, "disk full");
  });
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message, "disk full");
  EXPECT_EQ(calls, 1u);
}

// write_pair copies a run of members whole while its inputs repeat from pair to pair
// (JsonWriter::run); each pair must still print its own values. Neighbouring pairs here differ in
// every input of every run (dtype, shape, axes, op, role index, status, criteria, counts of NaN and
// zeros, origin and basis), then the first kind of pair comes back; each pair's members are held to
// the pair itself. A run whose key left out one of its values prints the pair before's.
TEST(ReportJson, RepeatedMembersFollowEachPair) {
  ScratchDir d;
  auto v = noise(16, 1);
  auto nan = v;
  nan[2] = std::nan("");
  auto zeros = v;
  zeros[0] = zeros[5] = 0;
  auto off = v;
  for (auto& x : off) x *= 1.01;
  std::vector<Entry> a, b;
  auto pair = [&](Entry e, std::vector<double> cand, std::vector<uint64_t> cand_shape = {}) {
    a.push_back(e);
    e.values = std::move(cand);
    e.shape = std::move(cand_shape);
    b.push_back(e);
  };
  pair({"p0", v}, v);
  pair({"p1", v}, nan);
  pair({"p2", v, {}, DType::f16}, v);
  pair({"p3", zeros, {4, 4}, DType::f32, Role::output, 0, "Op", {"batch", "hidden"}}, off, {4, 4});
  pair({"p4", v, {16}}, noise(8, 2));  // incomparable: no criteria, no metrics
  pair({"p5", v}, v);
  pair({"p6", v, {}, DType::f32, Role::input, 1, "Other"}, off);
  pair({"p7", v}, v);
  // Each of these differs from the pair before in one value of one run only.
  pair({"p8", v, {}, DType::f32, Role::output, 0, "OpB"}, v);
  pair({"p9", v, {}, DType::f32, Role::output, 2, "OpB"}, v);
  auto zero_cand = v;
  zero_cand[1] = 0;
  pair({"p10", v, {}, DType::f32, Role::output, 2, "OpB"}, zero_cand);
  for (int round = 0; round < 2; ++round) {  // the second report starts with the first one's runs held
    Report r = run_compare(write_dump(d.file("a" + std::to_string(round) + ".tdump"), a),
                           write_dump(d.file("b" + std::to_string(round) + ".tdump"), b));
    ASSERT_EQ(r.pairs.size(), a.size());
    auto j = nlohmann::json::parse(report_to_json(r));
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const PairResult& p = r.pairs[i];
      const auto& t = j["tensors"][i];
      const bool c = p.compared;
      SCOPED_TRACE(p.ref.name());
      EXPECT_EQ(t["role"], role_name(p.ref.role));
      EXPECT_EQ(t["role_index"], p.ref.role_index);
      EXPECT_EQ(t["op_type"], p.ref.op_type());
      EXPECT_EQ(t["dtype_ref"], dtype_name(p.ref.dtype));
      EXPECT_EQ(t["dtype_cand"], dtype_name(p.cand.dtype));
      EXPECT_EQ(t["shape_ref"], nlohmann::json(std::vector<uint64_t>(p.ref.shape().begin(), p.ref.shape().end())));
      EXPECT_EQ(t["shape_cand"], nlohmann::json(std::vector<uint64_t>(p.cand.shape().begin(), p.cand.shape().end())));
      EXPECT_EQ(t["axes_ref"], nlohmann::json(p.ref.axes()));
      EXPECT_EQ(t["status"], status_name(p.status));
      const bool judged = p.status != PairStatus::incomparable && p.status != PairStatus::skipped;
      if (judged) EXPECT_EQ(t["criteria"]["source"], p.criteria_source());
      else EXPECT_EQ(t["criteria"], nullptr);
      EXPECT_EQ(t["count"], c ? nlohmann::json(p.metrics.count) : nlohmann::json(nullptr));
      EXPECT_EQ(t["nan_cand"], c ? nlohmann::json(p.metrics.nan_cand()) : nlohmann::json(nullptr));
      EXPECT_EQ(t["nan_positions_match"], c ? nlohmann::json(p.metrics.nan_positions_match) : nlohmann::json(nullptr));
      EXPECT_EQ(t["zero_ref"], c ? nlohmann::json(p.metrics.zero_ref) : nlohmann::json(nullptr));
      EXPECT_EQ(t["zero_cand"], c ? nlohmann::json(p.metrics.zero_cand) : nlohmann::json(nullptr));
      EXPECT_EQ(t["origin"], p.origin == Origin::none ? nlohmann::json(nullptr) : nlohmann::json(origin_name(p.origin)));
      EXPECT_EQ(t["basis"], c ? nlohmann::json(p.basis()) : nlohmann::json(nullptr));
      EXPECT_EQ(t["beyond_rounding"], c ? nlohmann::json(p.beyond_rounding) : nlohmann::json(nullptr));
    }
    // Every kind of neighbour is there (else the test would hold nothing).
    EXPECT_EQ(j["tensors"][1]["nan_cand"], 1);
    EXPECT_EQ(j["tensors"][2]["dtype_ref"], "f16");
    EXPECT_EQ(j["tensors"][round == 0 ? 3 : 0]["zero_ref"], 2);
    EXPECT_EQ(j["tensors"][4]["status"], "incomparable");
    EXPECT_EQ(j["tensors"][6]["op_type"], "Other");
    EXPECT_EQ(j["tensors"][8]["op_type"], "OpB");
    EXPECT_EQ(j["tensors"][9]["role_index"], 2);
    EXPECT_EQ(j["tensors"][10]["zero_cand"], 1);
    std::swap(a[0], a[3]), std::swap(b[0], b[3]);
  }
}

TEST(ReportMarkdown, EscapesCellsAndLeadsWithVerdict) {
  ScratchDir d;
  auto v = noise(8, 2);
  auto w = v;
  for (auto& x : w) x *= 3;
  Report r = run_compare(write_dump(d.file("a.tdump"), {{"a|b", v}}), write_dump(d.file("b.tdump"), {{"a|b", w}}));
  std::string md = report_to_markdown(r);
  EXPECT_EQ(md.rfind("## \u274C driftscope compare: diverged\n", 0), 0u) << md;
  // A code span outside a table shows '|' as is; inside a table cell GFM needs it escaped.
  EXPECT_NE(md.find("### First divergence: `a|b`\n"), std::string::npos) << md;
  EXPECT_NE(md.find("<details><summary>All 1 pairs</summary>"), std::string::npos);
  EXPECT_NE(md.find("| 0 | `a\\|b` | Op | **fail** (first) |"), std::string::npos) << md;
}

TEST(ReportText, ColourAndWidth) {
  ScratchDir d;
  auto v = noise(8, 3);
  auto w = v;
  w[2] += 1.0;
  std::string longname(80, 'x');
  Report r = run_compare(write_dump(d.file("a.tdump"), {{longname + ".tail", v}}),
                         write_dump(d.file("b.tdump"), {{longname + ".tail", w}}));
  TextOptions plain;
  plain.width = 80;
  std::string t = report_to_text(r, plain);
  EXPECT_EQ(t.find("\x1b["), std::string::npos);
  EXPECT_EQ(t.rfind("DIVERGED: first divergence at " + longname + ".tail (index 0, Op)", 0), 0u);
  // Table rows fit the width; long names keep their tail.
  for (size_t pos = 0; (pos = t.find("\n>", pos)) != std::string::npos; ++pos) {
    size_t end = t.find('\n', pos + 1);
    std::string row = t.substr(pos + 1, end - pos - 1);
    EXPECT_LE(row.size(), 80u) << row;
    EXPECT_NE(row.find(" ...xxx"), std::string::npos) << row;
    EXPECT_NE(row.find("xxx.tail "), std::string::npos) << row;
  }
  TextOptions colour = plain;
  colour.color = true;
  EXPECT_EQ(report_to_text(r, colour).rfind("\x1b[1;31mDIVERGED", 0), 0u);
}

TEST(ReportText, IncomparableAndUnpairedAreListed) {
  ScratchDir d;
  auto v = noise(6, 4);
  Report r = run_compare(write_dump(d.file("a.tdump"), {{"t", v, {2, 3}}, {"gone", v}}),
                         write_dump(d.file("b.tdump"), {{"t", v, {3, 2}}, {"new", v}}));
  std::string t = report_to_text(r, {});
  EXPECT_NE(t.find("Only in the reference (1)"), std::string::npos) << t;
  EXPECT_NE(t.find("Only in the candidate (1)"), std::string::npos);
  EXPECT_NE(t.find("Incomparable (1)"), std::string::npos);
  EXPECT_NE(t.find("reshape_needed: shape [2,3] vs [3,2]"), std::string::npos) << t;
  EXPECT_EQ(r.verdict, Verdict::diverged);
}

// The Model Explorer overlay (issue 23 item 4: built by sorting and appending now, by keyed
// inserts into an ordered object before): names in byte order, one entry per name holding its
// worst pair (the first of equally bad ones), outputs that were compared only, invalid UTF-8
// replaced. The bytes are pinned: they must not change with how the document is built.
TEST(ReportModelExplorer, OneEntryPerNameInByteOrder) {
  Report r;
  auto add = [&](const char* name, PairStatus status, double error, Origin origin = Origin::inherited,
                 Role role = Role::output, bool compared = true) {
    PairResult& p = r.pairs.emplace_back();
    detail::ReportAccess::name(p.ref) = name;
    p.ref.role = role;
    p.compared = compared;
    p.status = status;
    p.error = error;
    p.origin = origin;
  };
  add("zeta", PairStatus::pass, 1e-9);
  add("alpha", PairStatus::pass, 1e-2);
  add("alpha", PairStatus::fail, 1e-3);                         // worse status: replaces
  add("alpha", PairStatus::fail, 1e-3, Origin::introduced);     // equally bad: the first stays
  add("Beta", PairStatus::pass, 0);                             // exact: -16
  add("b\xc3\xa9ta", PairStatus::silent_failure, INFINITY, Origin::introduced);
  add("bad\xff", PairStatus::fail, 2e-1, Origin::introduced);
  add("zeta", PairStatus::pass, 1e-6);                          // larger error, same status
  add("param", PairStatus::fail, 1, Origin::inherited, Role::parameter);
  add("skipped", PairStatus::skipped, 0, Origin::none, Role::output, /*compared=*/false);
  // The JSON keeps UTF-8 as it is; spelled <U+...> below.
  const std::string expected = R"({
  "name": "driftscope: log10 relative L2 error",
  "results": {
    "Beta": {
      "value": -16.0,
      "bgColor": "#bfe3c8"
    },
    "alpha": {
      "value": -3.0,
      "bgColor": "#ffd39a"
    },
    "bad<U+FFFD>": {
      "value": -0.6989700043360187,
      "bgColor": "#e07b00"
    },
    "b<U+00E9>ta": {
      "value": 6.0,
      "bgColor": "#d21f3c"
    },
    "zeta": {
      "value": -6.0,
      "bgColor": "#bfe3c8"
    }
  },
  "thresholds": [
    {
      "value": -6,
      "bgColor": "#bfe3c8"
    },
    {
      "value": -3,
      "bgColor": "#ffe8a3"
    },
    {
      "value": -1,
      "bgColor": "#ffd39a"
    },
    {
      "value": 6.0,
      "bgColor": "#f4a3b0"
    }
  ]
}
)";
  auto utf8 = [](std::string s) {
    for (auto [from, to] : {std::pair{"<U+FFFD>", "\xef\xbf\xbd"}, std::pair{"<U+00E9>", "\xc3\xa9"}})
      s.replace(s.find(from), std::string_view(from).size(), to);
    return s;
  };
  EXPECT_EQ(report_to_model_explorer(r), utf8(expected));
  r.pairs.clear();
  EXPECT_NE(report_to_model_explorer(r).find("\"results\": {},"), std::string::npos);
}

}  // namespace
