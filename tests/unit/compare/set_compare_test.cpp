// Comparing dump sets (docs/dumpsets.md §5): gathered and summed logical tensors against values
// computed by hand, and the ranks the report gives.
#include <fstream>

#include "compare_test_util.hpp"
#include "driftscope/dumpset.hpp"

namespace {

using namespace ds_test;

// A set of `world` ranks in group `g`; entries[r] are rank r's records.
std::string write_set(const ScratchDir& dir, const std::string& name, const std::string& g,
                      const std::vector<std::vector<Entry>>& entries, const std::string& order = "lockstep") {
  const std::string d = dir.file(name);
  std::filesystem::create_directories(d);
  const size_t world = entries.size();
  std::string ranks;
  for (size_t r = 0; r < world; ++r) {
    const std::string f = "rank-" + std::to_string(r) + ".tdump";
    write_dump(d + "/" + f, entries[r],
               {{"ds.rank", std::to_string(r)}, {"ds.world_size", std::to_string(world)},
                {"ds.coords", g + "=" + std::to_string(r)}});
    ranks += (r ? "," : "") + std::string("{\"rank\": ") + std::to_string(r) + ", \"file\": \"" + f +
             "\", \"coords\": {\"" + g + "\": " + std::to_string(r) + "}}";
  }
  std::ofstream(d + "/driftscope-set.json")
      << "{\"format\": \"driftscope.set/1\", \"world_size\": " << world << ", \"groups\": {\"" << g
      << "\": " << world << "}, \"order\": \"" << order << "\", \"ranks\": [" << ranks << "]}";
  return d;
}

Entry e(std::string name, std::vector<double> v, std::vector<uint64_t> shape, std::vector<std::string> axes,
        DType t = DType::f32) {
  Entry x;
  x.name = std::move(name);
  x.values = std::move(v);
  x.shape = std::move(shape);
  x.axes = std::move(axes);
  x.dtype = t;
  return x;
}

TEST(SetCompare, GatherConcatenatesAlongTheSplitAxisInCoordinateOrder) {
  ScratchDir dir;
  // Full [2,5] = rank 0 [2,2] | rank 1 [2,3] along columns (shards may differ in size).
  const std::string ref = write_dump(dir.file("ref.tdump"),
                                     {e("y", {1, 2, 10, 20, 30, 3, 4, 40, 50, 60}, {2, 5}, {"r", "c"})});
  const std::string set = write_set(dir, "s", "tp",
                                    {{e("y", {1, 2, 3, 4}, {2, 2}, {"r", "c@tp"})},
                                     {e("y", {10, 20, 30, 40, 50, 60}, {2, 3}, {"r", "c@tp"})}});
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->atol = 0.0;
  auto rep = compare_files(ref, set, o);
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_EQ(rep->pairs.size(), 1u);
  const PairResult& p = rep->pairs[0];
  EXPECT_EQ(p.status, PairStatus::pass) << rep->summary;
  EXPECT_TRUE(std::ranges::equal(p.cand.shape(), std::vector<uint64_t>{2, 5}));
  EXPECT_EQ(p.cand.axes(), (std::vector<std::string>{"r", "c"}));
  EXPECT_EQ(p.cand.ranks(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.metrics.max_abs_diff, 0.0);
  EXPECT_TRUE(rep->sets);
  EXPECT_EQ(rep->candidate.world_size, 2u);

  // The same shards in the wrong order differ: rank order is coordinate order.
  const std::string swapped = write_set(dir, "w", "tp",
                                        {{e("y", {10, 20, 30, 40, 50, 60}, {2, 3}, {"r", "c@tp"})},
                                         {e("y", {1, 2, 3, 4}, {2, 2}, {"r", "c@tp"})}});
  auto bad = compare_files(ref, swapped, o);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->pairs[0].status, PairStatus::fail);
  EXPECT_EQ(bad->first_divergence_ranks, (std::vector<uint32_t>{0, 1}));
}

TEST(SetCompare, PartialSumsInFloat64AndStoresTheWidestFloat) {
  ScratchDir dir;
  // 2^24 + 1 + 1 + 0: float32 accumulation gives 2^24, float64 gives 2^24 + 2 (exact in f32).
  const double big = 16777216.0;
  const std::string ref = write_dump(dir.file("ref.tdump"), {e("s", {big + 2, 1.5}, {2}, {"h"})});
  const std::string set = write_set(dir, "s", "tp",
                                    {{e("s", {big, 0.5}, {2}, {"h+tp"})},
                                     {e("s", {1, 0.25}, {2}, {"h+tp"}, DType::f16)},
                                     {e("s", {1, 0.75}, {2}, {"h+tp"})},
                                     {e("s", {0, 0}, {2}, {"h+tp"}, DType::bf16)}});
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->atol = 0.0;
  auto rep = compare_files(ref, set, o);
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_EQ(rep->pairs.size(), 1u);
  EXPECT_EQ(rep->pairs[0].status, PairStatus::pass) << rep->summary;
  EXPECT_EQ(rep->pairs[0].cand.dtype, DType::f32);
  EXPECT_EQ(rep->pairs[0].metrics.max_abs_diff, 0.0);
}

TEST(SetCompare, ReplicasCompareRankByRankAndMissingShardsAreWarnings) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), {e("x", {1, 2}, {2}, {"h"}), e("g", {1, 2}, {2}, {"h"})});
  const std::string set = write_set(dir, "s", "tp",
                                    {{e("x", {1, 2}, {2}, {"h"}), e("g", {1}, {1}, {"h@tp"})},
                                     {e("x", {1, 7}, {2}, {"h"})}});
  auto rep = compare_files(ref, set, {});
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_EQ(rep->pairs.size(), 2u);
  EXPECT_EQ(rep->pairs[0].cand.ranks(), std::vector<uint32_t>{0});
  EXPECT_EQ(rep->pairs[0].status, PairStatus::pass);
  EXPECT_EQ(rep->pairs[1].cand.ranks(), std::vector<uint32_t>{1});
  EXPECT_EQ(rep->pairs[1].status, PairStatus::fail);
  EXPECT_EQ(rep->affected_ranks, std::vector<uint32_t>{1});
  EXPECT_NE(rep->summary.find("on rank 1 (of 2)"), std::string::npos) << rep->summary;
  ASSERT_EQ(rep->only_in_reference.size(), 1u);  // g: one of two shards
  EXPECT_EQ(rep->only_in_reference[0].name(), "g");
  ASSERT_FALSE(rep->warnings.empty());
  EXPECT_NE(rep->warnings[0].find("1 of its 2 shards"), std::string::npos) << rep->warnings[0];
}

}  // namespace

namespace {

TEST(SetCompare, ShardsThatCannotBeCombinedAreWarningsNotErrors) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), {e("y", {1, 2, 3, 4}, {2, 2}, {"r", "c"}),
                                                             e("z", {1, 2}, {2}, {"h"})});
  // y: the non-split axis differs (2 vs 1 rows); z: gathers f32 with f16.
  const std::string set = write_set(dir, "s", "tp",
                                    {{e("y", {1, 3}, {2, 1}, {"r", "c@tp"}), e("z", {1}, {1}, {"h@tp"})},
                                     {e("y", {2}, {1, 1}, {"r", "c@tp"}), e("z", {2}, {1}, {"h@tp"}, DType::f16)}});
  auto rep = compare_files(ref, set, {});
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  EXPECT_TRUE(rep->pairs.empty());
  EXPECT_EQ(rep->only_in_reference.size(), 2u);
  ASSERT_GE(rep->warnings.size(), 2u);
  EXPECT_NE(rep->warnings[0].find("only the split axis may differ"), std::string::npos) << rep->warnings[0];
  EXPECT_NE(rep->warnings[1].find("differ in dtype"), std::string::npos) << rep->warnings[1];
}

}  // namespace

namespace {

TEST(SetCompare, PipelineOrderPutsEarlierStagesFirst) {
  ScratchDir dir;
  // Stage 1 (rank 1) recorded exec_index 0..1, stage 0 (rank 0) exec_index 0..1 as well: the
  // pipeline order is (pp, exec_index, rank), so every stage-0 record comes first.
  Entry a = e("a", {1}, {1}, {"h"}), b = e("b", {2}, {1}, {"h"}), c = e("c", {3}, {1}, {"h"}),
        d = e("d", {4}, {1}, {"h"});
  const std::string set = write_set(dir, "p", "pp", {{a, b}, {c, d}}, "pipeline");
  auto s = DumpSet::open(set);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  std::vector<std::string> names;
  for (const auto& [rank, rec] : s->records_in_global_order()) names.push_back(rec->info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d"}));
  const std::string lock = write_set(dir, "l", "tp", {{a, b}, {c, d}});
  auto l = DumpSet::open(lock);
  ASSERT_TRUE(l.ok());
  names.clear();
  for (const auto& [rank, rec] : l->records_in_global_order()) names.push_back(rec->info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "c", "b", "d"}));
  // Pairs follow the reference's order; each failing pair names the rank (stage) it came from.
  const std::string ref = write_dump(dir.file("ref.tdump"), {a, e("b", {9}, {1}, {"h"}), e("c", {9}, {1}, {"h"}), d});
  auto rep = compare_files(ref, set, {});
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_TRUE(rep->first_divergence.has_value());
  EXPECT_EQ(rep->pairs[*rep->first_divergence].ref.name(), "b");
  EXPECT_EQ(rep->first_divergence_ranks, std::vector<uint32_t>{0});
  EXPECT_EQ(rep->affected_ranks, (std::vector<uint32_t>{0, 1}));
}

}  // namespace

namespace {

size_t entries_in(const std::string& d) {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(d), std::filesystem::directory_iterator{}));
}

// prepare_sets + the parts API + finish (what --engine ray runs) gives compare_files' report.
TEST(SetCompare, InPartsTheReportIsCompareFilesReport) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), {e("x", {1, 2}, {2}, {"h"}), e("g", {1, 2}, {2}, {"h"}),
                                                             e("y", {1, 2, 3, 4}, {2, 2}, {"r", "c"})});
  const std::string set = write_set(dir, "s", "tp",
                                    {{e("x", {1, 2}, {2}, {"h"}), e("g", {1}, {1}, {"h@tp"}),
                                      e("y", {1, 3}, {2, 1}, {"r", "c@tp"})},
                                     {e("x", {1, 7}, {2}, {"h"}), e("y", {2, 5}, {2, 1}, {"r", "c@tp"})}});
  const std::string scratch = dir.file("scratch");
  std::filesystem::create_directories(scratch);
  for (const auto& [a, b] : {std::pair{ref, set}, std::pair{set, ref}, std::pair{set, set}}) {
    auto whole = compare_files(a, b, {});
    ASSERT_TRUE(whole.ok()) << whole.error().to_string();
    Report rep = compare_sets_in_parts(a, b, scratch);
    EXPECT_EQ(report_to_json(rep), report_to_json(*whole));
    EXPECT_TRUE(rep.sets);
  }
  // A bad set: an error, and nothing left in the directory.
  std::ofstream(dir.file("s") + "/driftscope-set.json") << "{\"format\": \"driftscope.set/9\"}";
  auto bad = prepare_sets(ref, set, {}, scratch);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("candidate"), std::string::npos) << bad.error().message;
  EXPECT_EQ(entries_in(scratch), 0u);
  Report empty;
  EXPECT_FALSE(SetComparison{}.finish(empty).ok());
}

}  // namespace

namespace {

// docs/dumpsets.md §7.1: a failing gathered tensor against a whole (TP=1) reference names the
// ranks whose own shard fails against its slice of the reference.
TEST(SetCompare, AFailingGatheredTensorNamesTheRanksOfItsFailingShards) {
  ScratchDir dir;
  // Full [2,6]. y: three ranks hold 2 columns each, rank 2's shard is off in one element. rows:
  // split along the first axis (rank 2's shard is empty), rank 1's is off.
  const std::vector<double> full = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::string ref = write_dump(dir.file("ref.tdump"),
                                     {e("y", full, {2, 6}, {"r", "c"}), e("rows", full, {2, 6}, {"r", "c"}),
                                      e("s", {5, 7}, {2}, {"h"})});
  const std::string set = write_set(
      dir, "s", "tp",
      {{e("y", {1, 2, 7, 8}, {2, 2}, {"r", "c@tp"}), e("rows", {1, 2, 3, 4, 5, 6}, {1, 6}, {"r@tp", "c"}),
        e("s", {2, 3}, {2}, {"h+tp"})},
       {e("y", {3, 4, 9, 10}, {2, 2}, {"r", "c@tp"}), e("rows", {7, 8, 9, 10, 11, 12.5}, {1, 6}, {"r@tp", "c"}),
        e("s", {2, 3}, {2}, {"h+tp"})},
       {e("y", {5, 6, 11, 12.5}, {2, 2}, {"r", "c@tp"}), e("rows", {}, {0, 6}, {"r@tp", "c"}),
        e("s", {2, 3}, {2}, {"h+tp"})}});
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->atol = 0.0;
  auto rep = compare_files(ref, set, o);
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_EQ(rep->pairs.size(), 3u);
  const PairResult& y = rep->pairs[0];
  EXPECT_EQ(y.status, PairStatus::fail);
  EXPECT_EQ(y.shard_check(), "shards");
  EXPECT_EQ(y.failing_shards(), std::vector<uint32_t>{2});
  EXPECT_EQ(rep->pair_ranks(y), std::vector<uint32_t>{2});
  EXPECT_EQ(y.cand.ranks(), (std::vector<uint32_t>{0, 1, 2}));  // every shard stays listed there
  const PairResult& rows = rep->pairs[1];  // split along the first axis, an empty shard on rank 2
  EXPECT_EQ(rows.status, PairStatus::fail);
  EXPECT_EQ(rows.shard_check(), "shards");
  EXPECT_EQ(rep->pair_ranks(rows), std::vector<uint32_t>{1});
  // A partial sum (2+2+2 = 6, not 5) cannot be split into shards: every rank stays.
  const PairResult& sum = rep->pairs[2];
  EXPECT_EQ(sum.status, PairStatus::fail);
  EXPECT_EQ(sum.shard_check(), "partial_sum");
  EXPECT_EQ(rep->pair_ranks(sum), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(rep->first_divergence_ranks, std::vector<uint32_t>{2});
  EXPECT_EQ(rep->affected_ranks, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_NE(rep->summary.find("y on rank 2 (of 3)"), std::string::npos) << rep->summary;

  // Passing pairs are not measured again.
  auto good = compare_files(ref, ref, o);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->pairs[0].shard_check().empty());
}

TEST(SetCompare, WhenNoShardFailsAloneEveryRankStays) {
  ScratchDir dir;
  // Each column is exactly proportional to the reference's (cosine 1 per shard); the whole is not
  // (cosine (2 + 2) / (sqrt 5 sqrt 5) = 0.8).
  const std::string ref = write_dump(dir.file("ref.tdump"), {e("y", {1, 2}, {2}, {"h"})});
  const std::string set = write_set(dir, "s", "tp", {{e("y", {2}, {1}, {"h@tp"})}, {e("y", {1}, {1}, {"h@tp"})}});
  CompareOptions o;
  o.policy.global = Criteria{};
  o.policy.global->min_cosine = 0.9;
  auto rep = compare_files(ref, set, o);
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  ASSERT_EQ(rep->pairs.size(), 1u);
  EXPECT_EQ(rep->pairs[0].status, PairStatus::fail);
  EXPECT_EQ(rep->pairs[0].shard_check(), "no_shard_fails");
  EXPECT_EQ(rep->pair_ranks(rep->pairs[0]), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(rep->affected_ranks, (std::vector<uint32_t>{0, 1}));
}

}  // namespace
