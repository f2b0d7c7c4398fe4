// ds_pair_metrics: prints every PairMetrics field of the tensor pairs of two TDUMP files as JSON,
// so tests/python/test_metrics_numpy.py can check compare_pair against an independent numpy
// implementation. A test helper, not a user tool: `driftscope compare` is the user's command.
//
//   ds_pair_metrics REF.tdump CAND.tdump [--threads N] [--target NAME]
//   ds_pair_metrics --list-targets          (the SIMD targets this CPU runs, one a line)
//
// Each tensor of REF pairs with the tensor of the same name in CAND. Per-pair options come from
// string attributes of the REF tensor: atol, rtol, rel_eps, nan_equal (0/1), classes, top_k, and
// perm (the name of a u64 tensor in CAND holding cand_index). Output: a JSON array, one object
// per pair, non-finite numbers as the strings "nan", "inf", "-inf". Exit 0, or 2 on a usage or
// file error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bytes.hpp"
#include "driftscope/reader.hpp"
#include "numerics/pair_metrics.hpp"

namespace {

using driftscope::numerics::PairMetrics;
using driftscope::numerics::PairOptions;
using nlohmann::json;

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json to_json(const PairMetrics& m) {
  json j;
  j["count"] = m.count;
  j["nan_ref"] = m.nan_ref;
  j["nan_cand"] = m.nan_cand;
  j["nan_both"] = m.nan_both;
  j["inf_ref"] = m.inf_ref;
  j["inf_cand"] = m.inf_cand;
  j["inf_same"] = m.inf_same;
  j["nan_positions_match"] = m.nan_positions_match;
  j["inf_positions_match"] = m.inf_positions_match;
  j["finite_pairs"] = m.finite_pairs;
  j["max_abs_diff"] = num(m.max_abs_diff);
  j["mean_abs_diff"] = num(m.mean_abs_diff);
  j["rmse"] = num(m.rmse);
  j["max_rel_diff"] = num(m.max_rel_diff);
  j["cosine"] = num(m.cosine);
  j["sqnr_db"] = num(m.sqnr_db);
  j["nmse"] = num(m.nmse);
  j["rel_l2"] = num(m.rel_l2);
  j["norm_ref"] = num(m.norm_ref);
  j["norm_cand"] = num(m.norm_cand);
  j["sum_ref"] = num(m.sum_ref);
  j["sum_cand"] = num(m.sum_cand);
  j["sumsq_ref"] = num(m.sumsq_ref);
  j["sumsq_cand"] = num(m.sumsq_cand);
  j["dot"] = num(m.dot);
  j["sumsq_diff"] = num(m.sumsq_diff);
  j["min_ref"] = num(m.min_ref);
  j["max_ref"] = num(m.max_ref);
  j["min_cand"] = num(m.min_cand);
  j["max_cand"] = num(m.max_cand);
  j["zero_ref"] = m.zero_ref;
  j["zero_cand"] = m.zero_cand;
  j["const_ref"] = m.const_ref;
  j["const_cand"] = m.const_cand;
  j["mismatch_count"] = m.mismatch_count;
  j["mismatch_fraction"] = num(m.mismatch_fraction);
  j["first_mismatch"] = m.first_mismatch;
  j["first_mismatch_ref"] = num(m.first_mismatch_ref);
  j["first_mismatch_cand"] = num(m.first_mismatch_cand);
  j["max_abs_index"] = m.max_abs_index;
  j["max_abs_ref"] = num(m.max_abs_ref);
  j["max_abs_cand"] = num(m.max_abs_cand);
  j["max_ulp"] = m.max_ulp;
  j["rows"] = m.rows;
  j["argmax_agreement"] = num(m.argmax_agreement);
  j["topk_overlap"] = num(m.topk_overlap);
  return j;
}

std::string_view attr(const driftscope::TensorInfo& info, std::string_view key) {
  for (const auto& [k, v] : info.attrs)
    if (k == key) return v;
  return {};
}

int usage(const char* msg) {
  std::fprintf(stderr, "ds_pair_metrics: %s\nusage: ds_pair_metrics REF.tdump CAND.tdump "
               "[--threads N] [--target NAME]\n", msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  unsigned threads = 0;
  std::string target;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list-targets") {
      for (const auto& t : driftscope::numerics::available_targets()) std::printf("%s\n", t.c_str());
      return 0;
    }
    if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (a.rfind("--", 0) == 0) {
      return usage(("unknown option " + a).c_str());
    } else {
      files.push_back(a);
    }
  }
  if (files.size() != 2) return usage("expected two files");
  if (!target.empty() && !driftscope::numerics::force_target(target))
    return usage(("target not available: " + target).c_str());
  auto ref = driftscope::Reader::open(files[0]);
  if (!ref) return usage(ref.error().to_string().c_str());
  auto cand = driftscope::Reader::open(files[1]);
  if (!cand) return usage(cand.error().to_string().c_str());

  json out = json::array();
  for (const auto& r : ref->records()) {
    if (r.kind != driftscope::RecordKind::tensor) continue;
    json item;
    item["name"] = r.info.name;
    const auto* c = cand->find(r.info.name, r.info.occurrence, r.info.role, r.info.role_index);
    if (c == nullptr) {
      item["error"] = "not_found";
      out.push_back(item);
      continue;
    }
    PairOptions o;
    o.threads = threads;
    auto number = [&](std::string_view key, double fallback) {
      const std::string v(attr(r.info, key));
      return v.empty() ? fallback : std::strtod(v.c_str(), nullptr);
    };
    o.atol = number("atol", 0);
    o.rtol = number("rtol", 0);
    o.rel_eps = number("rel_eps", o.rel_eps);
    o.nan_equal = attr(r.info, "nan_equal") == "1";
    o.classes = static_cast<uint64_t>(number("classes", 0));
    o.top_k = static_cast<uint32_t>(number("top_k", o.top_k));
    std::vector<uint64_t> perm;
    if (const auto p = attr(r.info, "perm"); !p.empty()) {
      const auto* pr = cand->find(p);
      if (pr == nullptr || pr->info.dtype != driftscope::DType::u64) return usage("bad perm tensor");
      perm.resize(pr->payload.size() / 8);
      for (size_t i = 0; i < perm.size(); ++i)
        perm[i] = driftscope::detail::load_le<uint64_t>(pr->payload.data() + 8 * i);
      o.cand_index = perm;
    }
    auto m = driftscope::numerics::compare_pair(r.info, r.payload, c->info, c->payload, o);
    if (!m) {
      item["error"] = std::string(driftscope::errc_name(m.error().code));
      item["message"] = m.error().message;
    } else {
      item["metrics"] = to_json(*m);
    }
    out.push_back(item);
  }
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
