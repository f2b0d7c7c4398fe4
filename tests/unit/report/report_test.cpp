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
