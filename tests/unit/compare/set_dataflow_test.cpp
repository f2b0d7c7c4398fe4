// Data flow across ranks (docs/dumpsets.md §7.2): a logical tensor's inputs are the logical
// tensors its shards' inputs belong to, so origins, reach and basis work on a set as on a single
// dump. Small hand-written TP=2 runs: x (replicated) -> h (column split) -> p (partial sum) -> y
// (replicated, the all-reduce of p) -> z (replicated).
#include <fstream>

#include "compare_test_util.hpp"

namespace {

using namespace ds_test;

// A set of `ranks.size()` ranks in group `g` (names distinct from set_compare_test.cpp: unity build).
std::string flow_set(const ScratchDir& dir, const std::string& name, const std::vector<std::vector<Entry>>& ranks,
                     const std::string& g = "tp", const std::string& order = "lockstep") {
  const std::string d = dir.file(name);
  std::filesystem::create_directories(d);
  std::string list;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string f = "rank-" + std::to_string(r) + ".tdump";
    write_dump(d + "/" + f, ranks[r],
               {{"ds.rank", std::to_string(r)}, {"ds.world_size", std::to_string(ranks.size())},
                {"ds.coords", g + "=" + std::to_string(r)}});
    list += (r ? "," : "") + std::string("{\"rank\": ") + std::to_string(r) + ", \"file\": \"" + f +
            "\", \"coords\": {\"" + g + "\": " + std::to_string(r) + "}}";
  }
  std::ofstream(d + "/driftscope-set.json")
      << "{\"format\": \"driftscope.set/1\", \"world_size\": " << ranks.size() << ", \"groups\": {\"" << g
      << "\": " << ranks.size() << "}, \"order\": \"" << order << "\", \"ranks\": [" << list << "]}";
  return d;
}

// A record computed from `inputs` (a ds.inputs value; nullptr: no data flow recorded).
Entry rec(std::string name, std::vector<double> v, std::vector<uint64_t> shape, std::vector<std::string> axes,
          const char* inputs) {
  Entry x;
  x.name = std::move(name);
  x.values = std::move(v);
  x.shape = std::move(shape);
  x.axes = std::move(axes);
  if (inputs) x.attrs.emplace_back("ds.inputs", inputs);
  return x;
}

// The TP=1 run: h[i][j] = (i + 1) x[j]; p = y = z = 2.
std::vector<Entry> whole_run(bool dataflow = true) {
  auto in = [&](const char* s) { return dataflow ? s : nullptr; };
  return {rec("x", {1, 2, 3, 4}, {4}, {"h"}, in("")),
          rec("h", {1, 2, 3, 4, 2, 4, 6, 8}, {2, 4}, {"r", "c"}, in("output/0/0:x")),
          rec("p", {2, 2, 2, 2}, {4}, {"h"}, in("output/0/0:h")),
          rec("y", {2, 2, 2, 2}, {4}, {"h"}, in("output/0/0:p")),
          rec("z", {2, 2, 2, 2}, {4}, {"h"}, in("output/0/0:y"))};
}

// Rank r of the TP=2 run; `fault`: rank 1's copy of x is off in its last element, and so is
// everything computed from it: its shard of h, its partial sum, and (after the all-reduce) both
// ranks' y and z. `extra`: an extra tensor between x and h on each rank.
std::vector<Entry> rank_run(int r, bool fault, bool extra = false) {
  const double d = fault && r == 1 ? 0.5 : 0.0;
  const double s = fault ? 0.3 : 0.0;
  std::vector<Entry> out = {rec("x", {1, 2, 3, 4 + d}, {4}, {"h"}, "")};
  if (extra) out.push_back(rec("extra", {1, 2, 3, 4 + d}, {4}, {"h"}, "output/0/0:x"));
  const char* h_in = extra ? "output/0/0:extra" : "output/0/0:x";
  if (r == 0) {
    out.push_back(rec("h", {1, 2, 2, 4}, {2, 2}, {"r", "c@tp"}, h_in));
    out.push_back(rec("p", {1, 1, 1, 1}, {4}, {"h+tp"}, "output/0/0:h"));
  } else {
    out.push_back(rec("h", {3, 4 + d, 6, 8 + 2 * d}, {2, 2}, {"r", "c@tp"}, h_in));
    out.push_back(rec("p", {1, 1, 1, 1 + s}, {4}, {"h+tp"}, "output/0/0:h"));
  }
  out.push_back(rec("y", {2, 2, 2, 2 + s}, {4}, {"h"}, "output/0/0:p"));  // all-reduce of p
  out.push_back(rec("z", {2, 2, 2, 2 + s}, {4}, {"h"}, "output/0/0:y"));
  return out;
}

// The ranks of a pair's set side (the reference's when only the reference is a set).
const std::vector<uint32_t>& side_ranks(const Report& r, const PairResult& p) {
  return r.reference.set && !r.candidate.set ? p.ref.ranks() : p.cand.ranks();
}

size_t pair_at(const Report& r, const std::string& name, const std::vector<uint32_t>& ranks) {
  for (size_t i = 0; i < r.pairs.size(); ++i)
    if (r.pairs[i].ref.name() == name && side_ranks(r, r.pairs[i]) == ranks) return i;
  ADD_FAILURE() << "no pair " << name;
  return 0;
}

// Each pair and the pairs its input error was measured on: "name@rank" for a replica, "name*"
// for a tensor gathered or summed over both ranks.
std::string bases(const Report& r) {
  auto label = [&](const PairResult& p) {
    const auto& ranks = side_ranks(r, p);
    return std::string(p.ref.name()) + (ranks.size() > 1 ? std::string("*") : "@" + std::to_string(ranks[0]));
  };
  std::string s;
  for (const PairResult& p : r.pairs) {
    s += label(p) + "<-";
    for (size_t j : p.basis_pairs()) s += label(r.pairs[j]) + ",";
    s += " ";
  }
  return s;
}

TEST(SetDataflow, AFaultOnRank1IsIntroducedThereAndInheritedDownstream) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), whole_run());
  const std::string fault = flow_set(dir, "fault", {rank_run(0, true), rank_run(1, true)});
  Report rep = run_compare(ref, fault);
  EXPECT_TRUE(rep.dataflow);
  // Gathered and summed tensors name the copies of every rank; a replica only its own rank's
  // (z@1 <- y@1), or the logical tensor that covers all ranks (y@0 <- p*: the all-reduce).
  EXPECT_EQ(bases(rep), "x@0<- x@1<- h*<-x@0,x@1, p*<-h*, y@0<-p*, y@1<-p*, z@0<-y@0, z@1<-y@1, ");
  const size_t x1 = pair_at(rep, "x", {1});
  EXPECT_EQ(rep.pairs[pair_at(rep, "x", {0})].status, PairStatus::pass);
  EXPECT_EQ(rep.pairs[x1].origin, Origin::introduced);
  for (auto [name, ranks] : std::vector<std::pair<std::string, std::vector<uint32_t>>>{
           {"h", {0, 1}}, {"p", {0, 1}}, {"y", {0}}, {"y", {1}}, {"z", {0}}, {"z", {1}}}) {
    const PairResult& p = rep.pairs[pair_at(rep, name, ranks)];
    EXPECT_EQ(p.status, PairStatus::fail) << name;
    EXPECT_EQ(p.origin, Origin::inherited) << name << " on " << ranks.back();
    EXPECT_EQ(p.basis(), "dataflow") << name;
  }
  ASSERT_EQ(rep.origins.size(), 1u) << rep.summary;
  EXPECT_EQ(rep.origins[0].pair, x1);
  EXPECT_EQ(rep.origins[0].reach, 6u);  // h, p, y and z on both ranks
  EXPECT_EQ(rep.origins[0].reach_failing, 6u);
  EXPECT_EQ(rep.first_divergence, x1);
  EXPECT_EQ(rep.first_divergence_ranks, std::vector<uint32_t>{1});

  // The set as the reference: its own data flow decides, with the same story.
  const std::string good = flow_set(dir, "good", {rank_run(0, false), rank_run(1, false)});
  for (const auto& [a, b] : {std::pair{good, fault}, std::pair{fault, ref}}) {
    Report r = run_compare(a, b);
    EXPECT_TRUE(r.dataflow);
    ASSERT_EQ(r.origins.size(), 1u) << r.summary;
    EXPECT_EQ(r.pairs[r.origins[0].pair].ref.name(), "x");
    EXPECT_EQ(r.pair_ranks(r.pairs[r.origins[0].pair]), std::vector<uint32_t>{1});
    EXPECT_EQ(r.origins[0].reach_failing, 6u);
    EXPECT_EQ(r.pairs[pair_at(r, "y", {0})].origin, Origin::inherited);
  }
  // Inputs are reported by their stored identities: the copies of x in the logical dump are one.
  const PairResult& h = rep.pairs[pair_at(rep, "h", {0, 1})];
  ASSERT_EQ(h.ref.inputs().size(), 1u);
  EXPECT_EQ(h.ref.inputs()[0], (TensorRef{"x", Role::output, 0, 0}));
}

TEST(SetDataflow, FilteredAndUnpairedInputsAreFollowedThrough) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), whole_run());
  const std::string fault = flow_set(dir, "fault", {rank_run(0, true, true), rank_run(1, true, true)});
  const std::string good = flow_set(dir, "good", {rank_run(0, false, true), rank_run(1, false, true)});
  // The reference set has `extra` (x -> extra -> h), the single dump has not: unpaired, so h is
  // measured against what extra came from, x on both ranks.
  Report rep = run_compare(fault, ref);
  ASSERT_EQ(rep.only_in_reference.size(), 2u);
  EXPECT_EQ(bases(rep), "x@0<- x@1<- h*<-x@0,x@1, p*<-h*, y@0<-p*, y@1<-p*, z@0<-y@0, z@1<-y@1, ");
  EXPECT_EQ(rep.pairs[pair_at(rep, "h", {0, 1})].origin, Origin::inherited);
  ASSERT_EQ(rep.origins.size(), 1u);
  EXPECT_EQ(rep.origins[0].reach, 6u);
  // Filtered out (h): p is measured against what h came from, through extra, to x.
  CompareOptions o;
  o.filter = "-h";
  Report f = run_compare(good, fault, o);
  EXPECT_TRUE(f.dataflow);
  EXPECT_EQ(bases(f), "x@0<- x@1<- extra@0<-x@0, extra@1<-x@1, p*<-extra@0,extra@1, y@0<-p*, y@1<-p*, "
                      "z@0<-y@0, z@1<-y@1, ");
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.pairs[f.origins[0].pair].ref.name(), "x");
  EXPECT_EQ(f.origins[0].reach, 6u);  // extra@1, p, y and z on both ranks
  EXPECT_EQ(f.pairs[pair_at(f, "p", {0, 1})].origin, Origin::inherited);
}

TEST(SetDataflow, WithoutEveryRanksDataFlowOriginsFollowTheGlobalOrder) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), whole_run());
  std::vector<Entry> bare = rank_run(1, false);
  for (Entry& e : bare) e.attrs.clear();
  const std::string mixed = flow_set(dir, "mixed", {rank_run(0, false), bare});
  Report rep = run_compare(mixed, ref);
  EXPECT_FALSE(rep.dataflow);
  ASSERT_FALSE(rep.warnings.empty());
  EXPECT_NE(rep.warnings[0].find("reference ranks 1 recorded no data flow (ds.inputs) and ranks 0 did"),
            std::string::npos) << rep.warnings[0];
  // No ds.inputs anywhere: nothing to say, as with a single dump.
  std::vector<Entry> bare0 = rank_run(0, false);
  for (Entry& e : bare0) e.attrs.clear();
  Report none = run_compare(flow_set(dir, "none", {bare0, bare}), write_dump(dir.file("r0.tdump"), whole_run(false)));
  EXPECT_FALSE(none.dataflow);
  EXPECT_TRUE(none.warnings.empty()) << none.warnings[0];
  // A pipeline of two stages: stage 1's ds.inputs cannot name what stage 0 sent it.
  const std::string pp = flow_set(dir, "pp", {rank_run(0, false), rank_run(1, false)}, "pp", "pipeline");
  Report p = run_compare(pp, ref);
  EXPECT_FALSE(p.dataflow);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings[0].find("pipeline of 2 stages"), std::string::npos) << p.warnings[0];
  // The candidate's data flow alone does not decide origins: the reference's does.
  Report c = run_compare(write_dump(dir.file("r1.tdump"), whole_run(false)),
                         flow_set(dir, "good", {rank_run(0, false), rank_run(1, false)}));
  EXPECT_FALSE(c.dataflow);
}

// What --engine ray runs (prepare_sets, the pairs measured in parts, finish) gives the same report
// with data flow as compare_files.
TEST(SetDataflow, InPartsTheDataFlowReportIsTheSame) {
  ScratchDir dir;
  const std::string ref = write_dump(dir.file("ref.tdump"), whole_run());
  const std::string fault = flow_set(dir, "fault", {rank_run(0, true, true), rank_run(1, true, true)});
  const std::string scratch = dir.file("scratch");
  std::filesystem::create_directories(scratch);
  for (const auto& [a, b] : {std::pair{ref, fault}, std::pair{fault, ref}}) {
    Report whole = run_compare(a, b);
    ASSERT_TRUE(whole.dataflow);
    EXPECT_EQ(report_to_json(compare_sets_in_parts(a, b, scratch)), report_to_json(whole));
  }
}

}  // namespace
