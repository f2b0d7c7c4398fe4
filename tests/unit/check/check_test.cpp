// `driftscope check` logic (src/check/run_check.cpp): each finding planted in a small dump, and
// its absence where the data is healthy.
#include <cmath>

#include <nlohmann/json.hpp>

#include "unit/compare/compare_test_util.hpp"
#include "compare/internal.hpp"
#include "driftscope/check.hpp"
#include "driftscope/report.hpp"

namespace {

using namespace ds_test;

// Rows of `len` along `axis` of a [a, b, c] tensor normalised to mean 0, variance 1 (float64).
std::vector<double> normalised(std::vector<double> v, const std::vector<uint64_t>& s, uint32_t axis) {
  const uint64_t stride = axis == 2 ? 1 : axis == 1 ? s[2] : s[1] * s[2];
  const uint64_t len = s[axis];
  for (uint64_t start = 0; start < v.size(); ++start) {
    auto c = driftscope::detail::unravel(start, s);
    if (c[axis] != 0) continue;
    double m = 0, q = 0;
    for (uint64_t k = 0; k < len; ++k) m += v[start + k * stride];
    m /= static_cast<double>(len);
    for (uint64_t k = 0; k < len; ++k) q += (v[start + k * stride] - m) * (v[start + k * stride] - m);
    const double sd = std::sqrt(q / static_cast<double>(len));
    for (uint64_t k = 0; k < len; ++k) v[start + k * stride] = (v[start + k * stride] - m) / sd;
  }
  return v;
}

CheckReport run_check(const std::string& path, const CheckOptions& o = {}) {
  auto r = check_file(path, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? std::move(*r) : CheckReport{};
}

std::vector<std::string> codes(const CheckReport& r) {
  std::vector<std::string> out;
  for (const auto& f : r.findings) out.push_back(f.code + ":" + f.name);
  return out;
}

TEST(Check, LayerNormAlongTheWrongAxisIsNamed) {
  ScratchDir dir;
  const std::vector<uint64_t> s{2, 6, 8};
  auto x = noise(96, 11, 3.0);
  Entry good{"ln_good", normalised(x, s, 2), s};
  good.op = "LayerNorm";
  good.axes = {"batch", "seq", "hidden"};
  good.attrs = {{"norm_axes", "-1"}, {"norm_kind", "layer"}};
  Entry bad = good;
  bad.name = "ln_bad";
  bad.values = normalised(x, s, 1);
  auto p = write_dump(dir.file("a.tdump"), {good, bad});
  CheckReport r = run_check(p);
  ASSERT_EQ(codes(r), std::vector<std::string>{"norm_axis:ln_bad"});
  EXPECT_EQ(r.findings[0].message,
            "is not normalised (mean 0, variance 1) along the declared axis 2 (hidden) in 100% of its slices "
            "(tolerance 0.05); it is normalised along axis 1 (seq) instead");
  EXPECT_DOUBLE_EQ(r.findings[0].value, 1.0);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(r.verdict(), "findings");
  // The learned affine case cannot be judged: said, not guessed.
  bad.attrs.push_back({"norm_affine", "true"});
  auto q = write_dump(dir.file("b.tdump"), {bad});
  CheckReport r2 = run_check(q);
  EXPECT_TRUE(r2.findings.empty());
  ASSERT_EQ(r2.notes.size(), 1u);
  EXPECT_NE(r2.notes[0].find("norm_affine=true"), std::string::npos);
}

TEST(Check, AxisNamesMatchByBaseAcrossShardAnnotations) {
  // A sequence-parallel shard names its axis seq@sp; norm_axes says "hidden" / "seq" by base name.
  ScratchDir dir;
  const std::vector<uint64_t> s{2, 6, 8};
  auto x = noise(96, 11, 3.0);
  Entry good{"ln_good", normalised(x, s, 2), s};
  good.op = "LayerNorm";
  good.axes = {"batch", "seq@sp", "hidden"};
  good.attrs = {{"norm_axes", "hidden"}, {"norm_kind", "layer"}};
  Entry bad = good;
  bad.name = "ln_bad";
  bad.values = normalised(x, s, 1);
  CheckReport r = run_check(write_dump(dir.file("a.tdump"), {good, bad}));
  ASSERT_EQ(codes(r), std::vector<std::string>{"norm_axis:ln_bad"});
  EXPECT_NE(r.findings[0].message.find("along axis 1 (seq@sp) instead"), std::string::npos) << r.findings[0].message;
}

TEST(Check, RmsNormAndSoftmaxAxes) {
  ScratchDir dir;
  const std::vector<uint64_t> s{1, 4, 5};
  auto x = noise(20, 12);
  std::vector<double> rms(x), soft(20), wrong(20);
  for (int i = 0; i < 4; ++i) {
    double q = 0, sum = 0, sum_col = 0;
    for (int j = 0; j < 5; ++j) q += x[i * 5 + j] * x[i * 5 + j];
    for (int j = 0; j < 5; ++j) rms[i * 5 + j] = x[i * 5 + j] / std::sqrt(q / 5);
    for (int j = 0; j < 5; ++j) sum += std::exp(x[i * 5 + j]);
    for (int j = 0; j < 5; ++j) soft[i * 5 + j] = std::exp(x[i * 5 + j]) / sum;
    (void)sum_col;
  }
  for (int j = 0; j < 5; ++j) {
    double sum = 0;
    for (int i = 0; i < 4; ++i) sum += std::exp(x[i * 5 + j]);
    for (int i = 0; i < 4; ++i) wrong[i * 5 + j] = std::exp(x[i * 5 + j]) / sum;
  }
  Entry a{"rms", rms, s};
  a.attrs = {{"norm_axes", "-1"}, {"norm_kind", "rms"}};
  Entry b{"probs", soft, s};
  b.attrs = {{"softmax_axis", "-1"}};
  Entry c{"probs_wrong", wrong, s};
  c.attrs = {{"softmax_axis", "2"}};
  CheckReport r = run_check(write_dump(dir.file("a.tdump"), {a, b, c}));
  ASSERT_EQ(codes(r), std::vector<std::string>{"softmax_axis:probs_wrong"});
  EXPECT_NE(r.findings[0].message.find("it sums to one along axis 1 instead"), std::string::npos)
      << r.findings[0].message;
}

// Checks by axis name (docs/axes.md §3.1): the record's names with norm_axes/softmax_axis, and the
// facts a recorder wrote into axes_ops; one judge for hand-written dumps and recorders alike.
TEST(Check, ChecksByAxisName) {
  ScratchDir dir;
  const std::vector<uint64_t> s{2, 8, 8};
  auto x = noise(128, 5, 1.0);
  // A LayerNorm over its last axis, which is named seq: normalised (norm_axis is silent), and wrong.
  Entry ln{"norm", normalised(x, s, 2), s};
  ln.op = "LayerNorm";
  ln.axes = {"batch", "hidden", "seq"};
  ln.attrs = {{"norm_axes", "-1"}, {"axes_from", "x: batch,seq,hidden (declared) -> transpose"}};
  Entry ok = ln;
  ok.name = "norm_ok";
  ok.axes = {"batch", "seq", "hidden"};
  // An ONNX export's dim_params: the same judge.
  Entry onnx = ln;
  onnx.name = "onnx_norm";
  onnx.op = "LayerNormalization";
  onnx.axes = {"batch_size", "8", "sequence_length"};
  onnx.attrs = {{"norm_axes", "-1"}};
  // Facts inside a module: softmax over query, a mean over batch, a seq/hidden meeting of size 8,
  // and a seq/key meeting (a mask on attention scores) that is no conflict.
  Entry attn{"attn", x, s};
  attn.axes = {"batch", "seq", "hidden"};
  attn.attrs = {{"axes_ops",
                 "softmax\tsoftmax\tbatch,heads,query,key\t2,4,8,8\t2\t\t\tx: batch,seq,hidden (declared)\n"
                 "reduce\tmean\tbatch,seq,hidden\t2,8,8\t0\t\t\tt\n"
                 "broadcast\tadd\tbatch,seq,hidden\t2,8,8\t\thidden,?\t8,1\tt\n"
                 "broadcast\tadd\tbatch,heads,query,key\t2,4,8,8\t\tbatch,?,?,seq\t2,1,1,8\tt\n"
                 "softmax\tsoftmax\tbatch,heads,query,key\t2,4,8,8\t3\t\t\tt\n"
                 "concat\tcat\tbatch,seq,hidden\t2,5,8\t1\tbatch,hidden,seq\t2,8,8\tt"}};
  // Fine facts: softmax over key, a mean over hidden, broadcast of size-1 against another name.
  Entry fine{"fine", x, s};
  fine.attrs = {{"axes_ops",
                 "softmax\tsoftmax\tbatch,heads,query,key\t2,4,8,8\t3\t\t\tt\n"
                 "reduce\tmean\tbatch,seq,hidden\t2,8,8\t2\t\t\tt\n"
                 "broadcast\tmul\tbatch,seq,hidden\t2,8,8\t\tbatch,hidden,?\t2,1,1\tt\n"
                 "concat\tcat\tbatch,seq,hidden\t2,5,8\t1\tbatch,seq,hidden\t2,3,8\tt"}};
  // Malformed entries (a producer's free text under the reserved key): skipped, counted.
  Entry junk{"junk", x, s};
  junk.attrs = {{"axes_ops", "norm\tlayer_norm\tbatch\t2,8\t0\t\t\tt\nnot an entry"}};
  CheckReport r = run_check(write_dump(dir.file("a.tdump"), {ln, ok, onnx, attn, fine, junk}));
  ASSERT_EQ(codes(r), (std::vector<std::string>{"norm_over:norm", "norm_over:onnx_norm", "softmax_over:attn", "reduce_over_batch:attn",
                                                "broadcast_conflict:attn", "concat_mismatch:attn"}));
  EXPECT_EQ(r.findings[0].message,
            "LayerNorm normalises over seq (axis 2 of batch,hidden,seq), not the feature axis; names from: x: "
            "batch,seq,hidden (declared) -> transpose");
  EXPECT_EQ(r.findings[1].message,
            "LayerNormalization normalises over sequence_length (axis 2 of batch_size,8,sequence_length), not the "
            "feature axis");
  r.findings.erase(r.findings.begin() + 1);
  EXPECT_EQ(r.findings[1].message,
            "softmax normalises over query (axis 2 of batch,heads,query,key): attention probabilities sum to one "
            "over the key axis; names from: x: batch,seq,hidden (declared)");
  EXPECT_NE(r.findings[2].message.find("mean reduces over batch (axis 0 of batch,seq,hidden)"), std::string::npos);
  EXPECT_EQ(r.findings[3].message,
            "add meets seq with hidden (both size 8) at axis -2: batch,seq,hidden with hidden,?; a same-size axis of "
            "another meaning broadcast silently; names from: t");
  EXPECT_EQ(r.findings[4].message,
            "cat along axis 1 joins parts whose axis 1 is seq on one side and hidden on the other: batch,seq,hidden "
            "with batch,hidden,seq; names from: t");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("axes_ops not judged: malformed entries"), std::string::npos);
  CheckOptions o;
  o.ignore = {"norm_over", "softmax_over", "reduce_over_batch", "broadcast_conflict", "concat_mismatch"};
  EXPECT_TRUE(run_check(dir.file("a.tdump"), o).findings.empty());
}

TEST(Check, ValueFindings) {
  ScratchDir dir;
  auto healthy = noise(32, 13);
  std::vector<double> nan_v = healthy;
  nan_v[3] = std::nan("");
  std::vector<double> dead = healthy;  // [4, 8]: channel 5 zero for every token
  for (int t = 0; t < 4; ++t) dead[t * 8 + 5] = 0;
  std::vector<double> big = healthy;
  big[7] = 40000;
  Entry f16{"f16_big", big, {4, 8}, DType::f16};
  std::vector<double> sat(100, 5);
  for (int i = 0; i < 5; ++i) sat[i] = 127;
  Entry i8{"q", sat, {100}, DType::i8};
  Entry param{"w", std::vector<double>(8, 0.0), {8}};
  param.role = Role::parameter;  // a zero bias is no finding
  auto p = write_dump(dir.file("a.tdump"),
                      {{"ok", healthy, {4, 8}}, {"nan", nan_v, {4, 8}}, {"zeros", std::vector<double>(8, 0.0), {8}},
                       {"const", std::vector<double>(8, 2.5), {8}}, {"dead", dead, {4, 8}}, f16, i8, param});
  CheckReport r = run_check(p);
  EXPECT_EQ(codes(r), (std::vector<std::string>{"nonfinite:nan", "all_zero:zeros", "constant:const",
                                                "dead_channels:dead", "f16_near_overflow:f16_big",
                                                "int8_saturation:q"}));
  EXPECT_EQ(r.findings[0].message, "1 NaN, 0 +Inf, 0 -Inf of 32 elements");
  EXPECT_EQ(r.findings[3].message, "1 of 8 channels along axis 1 are zero at every one of their 4 positions (channels 5)");
  EXPECT_DOUBLE_EQ(r.findings[5].value, 0.05);
  EXPECT_EQ(r.tensors_checked, 8u);
  // --ignore drops a code; an unknown code is refused naming it.
  CheckOptions o;
  o.ignore = {"dead_channels", "constant"};
  EXPECT_EQ(run_check(p, o).findings.size(), 4u);
  o.ignore = {"deadchannels"};
  auto bad = check_file(p, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
  EXPECT_NE(bad.error().message.find("'deadchannels'"), std::string::npos);
}

TEST(Check, ZeroPointExtremeIsNotSaturation) {
  ScratchDir dir;
  std::vector<double> v(100, -128);  // a ReLU output's floor at zero point -128
  Entry e{"relu_q", v, {100}, DType::i8};
  e.encoding.kind = EncodingKind::affine_tensor;
  e.encoding.scales = {0.1};
  e.encoding.zero_points = {-128};
  v[0] = 3;
  e.values = v;
  CheckReport r = run_check(write_dump(dir.file("a.tdump"), {e}));
  EXPECT_TRUE(r.findings.empty()) << check_to_text(r);
}

TEST(Check, OneAxisNameTwoSizes) {
  ScratchDir dir;
  Entry a{"a", noise(12, 1), {3, 4}};
  a.axes = {"seq", "hidden"};
  Entry b{"b", noise(20, 2), {5, 4}};
  b.axes = {"seq", "hidden"};
  Entry c{"c", noise(10, 3), {5, 2}};
  c.axes = {"seq", "hidden"};
  auto p = write_dump(dir.file("a.tdump"), {a, b, c});
  CheckReport r = run_check(p);
  ASSERT_EQ(codes(r), (std::vector<std::string>{"axis_size:b", "axis_size:c"}));
  EXPECT_EQ(r.findings[0].message,
            "axis 'seq' has size 5 here (axis 0) but 3 in a; declare it dynamic if it may vary (--dynamic seq)");
  CheckOptions o;
  o.dynamic_axes = {"seq"};
  EXPECT_EQ(codes(run_check(p, o)), std::vector<std::string>{"axis_size:c"});
  // The run's own declaration counts too.
  auto q = write_dump(dir.file("b.tdump"), {a, b}, {{"dynamic_axes", "batch,seq"}});
  EXPECT_TRUE(run_check(q).findings.empty());
}

// A CNN's feature maps: every strided convolution changes height/width and channels. These layout
// names (what the recorders give convolution-family outputs) are not identities, so no axis_size
// (it fired on every strided CNN the PyTorch and LiteRT recorders named); `batch` still is one.
TEST(Check, ImageLayoutNamesMayChangeSize) {
  ScratchDir dir;
  Entry a{"conv1", noise(2 * 8 * 16 * 16, 1), {2, 8, 16, 16}};
  a.axes = {"batch", "channels", "height", "width"};
  Entry b{"conv2", noise(2 * 16 * 8 * 8, 2), {2, 16, 8, 8}};
  b.axes = {"batch", "channels", "height", "width"};
  Entry c{"nhwc", noise(3 * 4 * 4 * 32, 3), {3, 4, 4, 32}};
  c.axes = {"batch", "height", "width", "channels"};
  CheckReport r = run_check(write_dump(dir.file("cnn.tdump"), {a, b, c}));
  EXPECT_EQ(codes(r), std::vector<std::string>{"axis_size:nhwc"}) << check_to_text(r);
  EXPECT_NE(r.findings.at(0).message.find("axis 'batch' has size 3"), std::string::npos) << check_to_text(r);
}

// The summary counts distinct tensor names (issue 23 item 4: counted by sorting now, by a search
// of the names seen before): names repeated apart from each other, and one name with two
// findings, each counted once; the first finding is the one named. An axis name is reported
// once however many tensors disagree with its first size (c's seq of 5 is not reported).
TEST(Check, SummaryCountsEachNameOnce) {
  ScratchDir dir;
  std::vector<double> zeros(8, 0.0), threes(8, 3.0), inf = noise(8, 5);
  inf[2] = INFINITY;
  auto healthy = noise(8, 6);
  Entry b_conflict{"b", noise(12, 7), {3, 4}};
  b_conflict.axes = {"seq", "hidden"};
  Entry a_axes{"a", noise(8, 8), {2, 4}};
  a_axes.axes = {"seq", "hidden"};
  Entry c_again{"c", noise(20, 9), {5, 4}};
  c_again.axes = {"seq", "hidden"};
  auto p = write_dump(dir.file("a.tdump"),
                      {{"c", threes}, {"a", zeros}, {"ok", healthy}, {"c", zeros}, {"b", inf}, {"a", threes},
                       a_axes, b_conflict, c_again, {"d", zeros}});
  CheckReport r = run_check(p);
  EXPECT_EQ(codes(r), (std::vector<std::string>{"constant:c", "all_zero:a", "all_zero:c", "nonfinite:b",
                                                "constant:a", "axis_size:b", "all_zero:d"}));
  EXPECT_EQ(r.summary,
            "FINDINGS: 7 in 4 of 10 tensors checked; first: constant at c: all 8 elements equal 3");
}

TEST(Check, VerdictsExitCodesAndJson) {
  ScratchDir dir;
  auto clean = write_dump(dir.file("clean.tdump"), {{"x", noise(16, 4), {4, 4}}});
  CheckReport r = run_check(clean);
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.summary, "CLEAN: 1 tensors checked, no findings (1 records, clean)");
  auto j = nlohmann::json::parse(check_to_json(r));
  EXPECT_EQ(j["schema"], "driftscope.check.report/1");
  EXPECT_EQ(j["verdict"], "clean");
  EXPECT_EQ(j["exit_code"], 0);
  auto empty = write_dump(dir.file("empty.tdump"), {});
  CheckReport e = run_check(empty);
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_EQ(e.verdict(), "nothing_checked");
  auto bad = check_file(dir.file("missing.tdump"));
  EXPECT_FALSE(bad.ok());
  CheckOptions o;
  o.saturation_fraction = 2;
  auto v = o.validate();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "check option 'saturation_fraction' is 2, allowed 0 .. 1");
}

}  // namespace

namespace {

// The JSON of a page's data block, as the page's script reads it.
nlohmann::json page_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"ds-report\">";
  auto at = html.find(open);
  EXPECT_NE(at, std::string::npos);
  auto end = html.find("</script>", at + open.size());
  return nlohmann::json::parse(html.substr(at + open.size(), end - at - open.size()));
}

TEST(ReportPages, CheckAndGuardPagesShareTheStylesheetAndKeepNamesInert) {
  ScratchDir dir;
  const std::string evil = "</script><img src=x onerror=alert(1)>&\x1b";
  auto p = write_dump(dir.file("a.tdump"), {{evil, std::vector<double>(8, 0.0), {2, 4}}});
  CheckReport r = run_check(p);
  ASSERT_FALSE(r.findings.empty());
  std::string html = check_to_html(r);
  EXPECT_EQ(html.find("%%DS_"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("function printable(s)"), std::string::npos);  // report_common.js
  EXPECT_NE(html.find(".badge{"), std::string::npos);                 // report.css
  // The data block reads back as the JSON report, the name exactly as stored.
  EXPECT_EQ(page_data(html), nlohmann::json::parse(check_to_json(r)));
  EXPECT_EQ(page_data(html)["findings"][0]["name"], evil);
  // The title is markup: escaped, control characters spelled out.
  auto t0 = html.find("<title>"), t1 = html.find("</title>");
  std::string title = html.substr(t0, t1 - t0);
  EXPECT_EQ(title.find('\x1b'), std::string::npos);
  EXPECT_EQ(title.find("<img"), std::string::npos);

  // The guard page: the same stylesheet, byte for byte, and the same data-block rule.
  nlohmann::json g = {{"summary", "SILENT FAILURE: " + evil}, {"verdict", "silent_failure"},
                      {"backends", nlohmann::json::array({{{"name", evil}}})}};
  auto gh = guard_report_to_html(g.dump());
  ASSERT_TRUE(gh.ok());
  EXPECT_EQ(gh->find("<img"), std::string::npos);
  EXPECT_EQ(page_data(*gh), g);
  auto style = [](const std::string& h) { return h.substr(h.find("<style>"), h.find("</style>") - h.find("<style>")); };
  EXPECT_EQ(style(*gh), style(html));
  // One <head> for every page (html_page.cpp): the same CSP, once, before any script; the compare
  // page's too.
  auto head = [](const std::string& h) {
    auto t = h.find("<title>");
    return h.substr(h.find("<head>"), t - h.find("<head>"));
  };
  auto count = [](const std::string& h, std::string_view what) {
    size_t n = 0;
    for (size_t at = h.find(what); at != std::string::npos; at = h.find(what, at + 1)) ++n;
    return n;
  };
  Report cr;
  cr.summary = "PASS";
  std::string ch = report_to_html(cr);
  for (const std::string* page : {&html, &*gh, &ch}) {
    EXPECT_EQ(head(*page), head(html));
    EXPECT_EQ(count(*page, "Content-Security-Policy"), 1u);
    EXPECT_LT(page->find("Content-Security-Policy"), page->find("<script"));
    EXPECT_EQ(page->find("%%DS_"), std::string::npos);
  }
  for (std::string_view bad : {"", "[1]", "{\"summary\": 1, \"backends\": []}", "{\"summary\": \"x\"}", "{"}) {
    auto e = guard_report_to_html(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code, Errc::invalid_argument);
  }
}

}  // namespace
