// driftscope._core: the one judge (include/driftscope/judge.hpp) for numpy arrays. The guard
// judges every output of every backend through judge_output with its criteria profile, so its
// statuses and compare's come from one status table and one validator.
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "py_core.hpp"
#include "driftscope/judge.hpp"
#include "driftscope/report.hpp"

namespace driftscope::py {
namespace {

using F64Array = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;

GuardCriteria criteria(double min_cosine, double min_norm, double max_argmax_flip,
                       std::optional<double> max_rel_error, double max_norm_ratio, double small_atol,
                       double small_rtol, double decision_threshold, double flip_rtol) {
  GuardCriteria c;
  c.min_cosine = min_cosine;
  c.min_norm = min_norm;
  c.max_argmax_flip = max_argmax_flip;
  c.max_rel_error = max_rel_error;
  c.max_norm_ratio = max_norm_ratio;
  c.small_atol = small_atol;
  c.small_rtol = small_rtol;
  c.decision_threshold = decision_threshold;
  c.flip_rtol = flip_rtol;
  return c;
}

TensorInfo f64_info(const F64Array& a) {
  TensorInfo info;
  info.dtype = DType::f64;
  for (size_t d = 0; d < a.ndim(); ++d) info.shape.push_back(a.shape(d));
  return info;
}

std::span<const std::byte> bytes(const F64Array& a) {
  return {reinterpret_cast<const std::byte*>(a.data()), a.size() * sizeof(double)};
}

nb::object number(double v) { return std::isnan(v) ? nb::none() : nb::cast(v); }
nb::object index(int64_t v) { return v < 0 ? nb::none() : nb::cast(v); }

// The profile's keywords, shared by judge_output and validate_guard_criteria.
#define DS_GUARD_CRITERIA_ARGS                                                                        \
  nb::kw_only(), nb::arg("min_cosine") = d.min_cosine, nb::arg("min_norm") = d.min_norm,            \
      nb::arg("max_argmax_flip") = d.max_argmax_flip, nb::arg("max_rel_error") = nb::none(),        \
      nb::arg("max_norm_ratio") = d.max_norm_ratio, nb::arg("small_atol") = d.small_atol,           \
      nb::arg("small_rtol") = d.small_rtol, nb::arg("decision_threshold") = d.decision_threshold,   \
      nb::arg("flip_rtol") = d.flip_rtol

}  // namespace

void bind_judge(nb::module_& m) {
  const GuardCriteria d{};
  // The guard profile's defaults, the seed thresholds of `driftscope guard` (its flags' defaults
  // and Thresholds' are checked against these by tests/python/test_one_judge.py).
  nb::dict defaults;
#define DS_GUARD_DEFAULT_(type, name, ...) defaults[#name] = d.name;
  DRIFTSCOPE_GUARD_CRITERIA(DS_GUARD_DEFAULT_)
#undef DS_GUARD_DEFAULT_
  m.attr("GUARD_CRITERIA_DEFAULTS") = defaults;
  // The profile's table (judge.hpp): the guard command's flags, help and metavars are built
  // from it (driftscope/_guard/_command.py).
  m.def("guard_criteria_options", [] { return option_rows(guard_criteria_specs()); });
  m.attr("FEW_VALUES") = kFewValues;
  m.attr("VANISHED_NORM_RATIO") = kVanishedNormRatio;

  m.def("status_table", [] {
    nb::list rows;
    for (const StatusRule& r : status_table())
      rows.append(nb::make_tuple(std::string(r.code), r.silent, std::string(output_status_name(r.guard))));
    return rows;
  }, "[(code, silent, guard status)] in the order the judges check them (docs/metrics.md §9).");

  m.def(
      "validate_guard_criteria",
      [](double min_cosine, double min_norm, double max_argmax_flip, std::optional<double> max_rel_error,
         double max_norm_ratio, double small_atol, double small_rtol, double decision_threshold,
         double flip_rtol) {
        check(validate(criteria(min_cosine, min_norm, max_argmax_flip, max_rel_error, max_norm_ratio,
                                small_atol, small_rtol, decision_threshold, flip_rtol)));
      },
      DS_GUARD_CRITERIA_ARGS);

  m.def(
      "guard_rel_error_limit",
      [](double min_cosine, double min_norm, double max_argmax_flip, std::optional<double> max_rel_error,
         double max_norm_ratio, double small_atol, double small_rtol, double decision_threshold,
         double flip_rtol) {
        return criteria(min_cosine, min_norm, max_argmax_flip, max_rel_error, max_norm_ratio, small_atol,
                        small_rtol, decision_threshold, flip_rtol)
            .rel_error_limit();
      },
      DS_GUARD_CRITERIA_ARGS, "GuardCriteria::rel_error_limit(): max_rel_error, or the bound the cosine and "
                              "norm-ratio rules imply together.");

  m.def(
      "judge_output",
      [](F64Array ref, F64Array cand, std::optional<uint32_t> class_axis, double min_cosine, double min_norm,
         double max_argmax_flip, std::optional<double> max_rel_error, double max_norm_ratio, double small_atol,
         double small_rtol, double decision_threshold, double flip_rtol) {
        GuardCriteria c = criteria(min_cosine, min_norm, max_argmax_flip, max_rel_error, max_norm_ratio,
                                   small_atol, small_rtol, decision_threshold, flip_rtol);
        TensorInfo ri = f64_info(ref), ci = f64_info(cand);
        std::optional<Result<OutputJudgement>> result;
        {
          nb::gil_scoped_release unlocked;
          result.emplace(judge_output(ri, bytes(ref), ci, bytes(cand), c, class_axis));
        }
        OutputJudgement j = unwrap(std::move(*result));
        nb::list codes;
        for (std::string_view code : j.codes) codes.append(std::string(code));
        nb::dict out;
        out["status"] = std::string(output_status_name(j.status));
        out["codes"] = codes;
        out["count"] = j.count;
        out["finite_pairs"] = j.finite_pairs;
        out["nan"] = j.nan;
        out["inf"] = j.inf;
        out["norm_ref"] = j.norm_ref;
        out["norm_cand"] = j.norm_cand;
        out["cosine"] = number(j.cosine);
        out["max_diff"] = number(j.max_diff);
        out["rel_error"] = number(j.rel_error);
        out["norm_ratio"] = number(j.norm_ratio);
        out["argmax_flip"] = number(j.argmax_flip);
        out["beyond"] = j.beyond;
        out["worst"] = index(j.worst);
        out["decisions"] = j.decisions;
        out["first_decision"] = index(j.first_decision);
        out["ties"] = j.ties;
        out["positions"] = j.positions;
        out["healthy"] = j.healthy;
        out["constant_value"] = number(j.constant_value);
        // The words are the report layer's, built from the codes and figures above.
        out["detail"] = guard_output_detail(j, c, class_axis);
        return out;
      },
      nb::arg("reference"), nb::arg("candidate"), nb::arg("class_axis") = nb::none(), DS_GUARD_CRITERIA_ARGS,
      "One output judged with the guard criteria profile: a dict of its status, the status "
      "table's codes that held, the figures behind them and \"detail\", the sentences "
      "explaining them (report.hpp guard_output_detail; float64 arrays, same shape).");
}

#undef DS_GUARD_CRITERIA_ARGS

}  // namespace driftscope::py
