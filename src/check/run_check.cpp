// `driftscope check`: findings from one run, no reference (include/driftscope/check.hpp,
// docs/axes.md "Checking one run"). Each tensor is decoded once in chunks; per-slice sums for the
// normalisation and softmax checks are kept for the declared axis and for each other axis, so a
// wrong axis is named, not just suspected.
#include "driftscope/check.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "judge/axes_checks.hpp"
#include "compare/internal.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/text.hpp"

namespace driftscope {
namespace {

constexpr uint64_t kChunk = uint64_t{1} << 16;
// Slice statistics keep 24 bytes per slice: at most this many slices per axis (96 MiB).
constexpr uint64_t kMaxSlices = uint64_t{1} << 22;

using compare_detail::attr_value;
using compare_detail::split_list;

std::string lower(std::string_view s) { return compare_detail::lowered(s); }
std::string_view attr(const TensorInfo& t, std::string_view key) { return attr_value(t, key); }
std::optional<std::vector<uint32_t>> parse_axes(std::string_view v, const TensorInfo& t) {
  return compare_detail::parse_axis_list(v, t);
}

std::string axis_text(const TensorInfo& t, const std::vector<uint32_t>& axes) {
  std::vector<std::string> v;
  for (uint32_t a : axes)
    v.push_back(a < t.axes.size() ? fmt::format("{} ({})", a, t.axes[a]) : std::to_string(a));
  return fmt::format("{} {}", axes.size() == 1 ? "axis" : "axes", fmt::join(v, ", "));
}

// Sums over slices: every element with the same coordinates outside `axes` shares a slice.
struct SliceSums {
  std::vector<uint32_t> axes;
  std::vector<uint64_t> stride;  // slice-id stride of each tensor axis (0 for the sliced axes)
  std::vector<double> sum, sumsq;
  std::vector<uint64_t> count;
  SliceSums(const std::vector<uint64_t>& shape, std::vector<uint32_t> a) : axes(std::move(a)) {
    stride.assign(shape.size(), 0);
    uint64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      if (std::find(axes.begin(), axes.end(), i) != axes.end()) continue;
      stride[i] = s;
      s *= shape[i];
    }
    sum.assign(s, 0);
    sumsq.assign(s, 0);
    count.assign(s, 0);
  }
  void add(const std::vector<uint64_t>& coords, double v) {
    uint64_t id = 0;
    for (size_t i = 0; i < coords.size(); ++i) id += coords[i] * stride[i];
    sum[id] += v;
    sumsq[id] += v * v;
    ++count[id];
  }
};

enum class SliceTest { layer_norm, rms_norm, softmax };

// Fraction of non-degenerate slices that break the test; NaN when none can be judged.
double bad_fraction(const SliceSums& s, SliceTest test, double tol) {
  uint64_t judged = 0, bad = 0;
  for (size_t i = 0; i < s.sum.size(); ++i) {
    const double n = static_cast<double>(s.count[i]);
    if (s.count[i] < 2) continue;
    const double mean = s.sum[i] / n, ms = s.sumsq[i] / n;
    switch (test) {
      case SliceTest::layer_norm: {
        const double var = ms - mean * mean;
        if (var < 1e-3 && std::fabs(mean) < tol) continue;  // a constant input row: eps decides
        ++judged;
        bad += std::fabs(mean) > tol || std::fabs(var - 1) > tol;
        break;
      }
      case SliceTest::rms_norm:
        if (ms < 1e-3) continue;
        ++judged;
        bad += std::fabs(ms - 1) > tol;
        break;
      case SliceTest::softmax:
        ++judged;
        bad += std::fabs(s.sum[i] - 1) > tol;
        break;
    }
  }
  return judged ? static_cast<double>(bad) / static_cast<double>(judged) : std::nan("");
}

const char* const kChannelNames[] = {"channels", "channel", "c", "hidden", "features", "feature", "embed"};

std::optional<uint32_t> channel_axis(const TensorInfo& t) {
  if (t.shape.size() < 2) return std::nullopt;
  for (size_t i = 0; i < t.axes.size(); ++i)
    for (const char* n : kChannelNames)
      if (lower(axis_base(t.axes[i])) == n) return static_cast<uint32_t>(i);
  if (!t.axes.empty()) return std::nullopt;  // named, and no axis says channels
  return static_cast<uint32_t>(t.shape.size() - 1);
}

class Checker {
 public:
  Checker(const Reader& r, const CheckOptions& o) : r_(r), o_(o) {
    dynamic_ = o.dynamic_axes;
    for (const auto& n : split_list(r.header().get("dynamic_axes"))) dynamic_.push_back(n);
  }

  Result<CheckReport> run() {
    rep_.state = std::string(file_state_name(r_.integrity().state));
    rep_.records = r_.records().size();
    warnings();
    for (const Record& rec : r_.records()) {
      axis_sizes(rec);
      axes_findings(rec.info);
      names_of(rec.info);
      if (rec.kind == RecordKind::summary) summary_checks(rec);
      else tensor_checks(rec);
    }
    DRIFTSCOPE_TRY(r_.check_unchanged());
    for (const auto& [what, n] : skipped_)
      rep_.notes.push_back(fmt::format("{} tensor(s): {}", n, what));
    rep_.summary = summary();
    return std::move(rep_);
  }

 private:
  const Reader& r_;
  const CheckOptions& o_;
  CheckReport rep_;
  std::vector<std::string> dynamic_;
  struct Seen {
    uint64_t size;
    std::string tensor;
  };
  std::map<std::string, Seen> sizes_;
  std::map<std::string, size_t> skipped_;
  std::set<std::string, std::less<>> reported_axes_;  // one finding per axis name

  bool wanted(std::string_view code) const {
    return std::find(o_.ignore.begin(), o_.ignore.end(), code) == o_.ignore.end();
  }

  void find(const TensorInfo& t, std::string code, std::string message, double value) {
    if (!wanted(code)) return;
    CheckFinding f;
    f.code = std::move(code);
    f.name = t.name;
    f.op_type = t.op_type;
    f.role = t.role;
    f.role_index = t.role_index;
    f.occurrence = t.occurrence;
    f.exec_index = t.exec_index;
    f.message = std::move(message);
    f.value = value;
    rep_.findings.push_back(std::move(f));
  }

  void warnings() {
    const Integrity& in = r_.integrity();
    if (in.state == FileState::cut)
      rep_.warnings.push_back(fmt::format("the file is cut at offset {} ({} bytes discarded); {} complete records "
                                          "were checked", in.cut_offset, in.discarded_bytes, rep_.records));
    else if (in.state == FileState::corrupt)
      rep_.warnings.push_back(fmt::format("the file is corrupt ({}); {} records before the damage were checked",
                                          in.corruption ? in.corruption->to_string() : std::string("unknown damage"),
                                          rep_.records));
    else if (in.state == FileState::unfinished)
      rep_.warnings.push_back(fmt::format("the run did not finish (no END record); {} records were checked",
                                          rep_.records));
  }

  static std::string who(const TensorInfo& t) {
    std::string s = t.name;
    if (t.role != Role::output || t.role_index != 0) s += fmt::format(" ({} {})", role_name(t.role), t.role_index);
    if (t.occurrence != 0) s += fmt::format(" #{}", t.occurrence);
    return s;
  }

  // The by-name findings (norm_over, softmax_over, ...): the one judge compare uses too.
  void axes_findings(const TensorInfo& t) {
    if (!compare_detail::has_axes_facts(t)) return;
    auto j = compare_detail::judge_axes(t, o_.ignore);
    for (auto& f : j.findings) find(t, std::move(f.code), std::move(f.message), f.value);
    if (j.malformed) ++skipped_["axes_ops not judged: malformed entries"];
  }

  void names_of(const TensorInfo& t) {
    std::string_view from = attr(t, "axes_from"), stop = attr(t, "axes_stop");
    if (t.axes.empty() && stop.empty()) return;
    if (rep_.tensor_axes.size() >= CheckReport::kMaxTensorAxes) {
      ++skipped_[fmt::format("axis names not listed (the first {} are)", CheckReport::kMaxTensorAxes)];
      return;
    }
    rep_.tensor_axes.push_back({t.name, t.role, t.role_index, t.occurrence, t.exec_index,
                                std::vector<uint64_t>(t.shape.begin(), t.shape.end()),
                                std::vector<std::string>(t.axes.begin(), t.axes.end()), std::string(from),
                                std::string(stop)});
  }

  // One axis name, one size per run: a name with two sizes is two meanings (or a bug). The image
  // layout names (the recorders' NCHW/NHWC names of convolution-family outputs, docs/axes.md) say
  // what an axis is for, not which one it is: a strided convolution halves `height` and widens
  // `channels` in every CNN, so they are never held to one size.
  static bool layout_role(std::string_view n) {
    return n == "channels" || n == "height" || n == "width" || n == "depth";
  }

  void axis_sizes(const Record& rec) {
    const TensorInfo& t = rec.info;
    for (size_t i = 0; i < t.axes.size() && i < t.shape.size(); ++i) {
      const std::string& n = t.axes[i];
      if (t.shape[i] <= 1 || layout_role(n) || std::find(dynamic_.begin(), dynamic_.end(), n) != dynamic_.end())
        continue;
      auto [it, fresh] = sizes_.try_emplace(n, Seen{t.shape[i], who(t)});
      if (fresh || it->second.size == t.shape[i]) continue;
      if (!reported_axes_.insert(n).second) continue;
      find(t, "axis_size",
           fmt::format("axis '{}' has size {} here (axis {}) but {} in {}; declare it dynamic if it may vary "
                       "(--dynamic {})", n, t.shape[i], i, it->second.size, it->second.tensor, n),
           static_cast<double>(t.shape[i]));
    }
  }

  void summary_checks(const Record& rec) {
    if (!rec.summary()) return;
    ++rep_.tensors_checked;
    const TensorStats& s = rec.summary()->stats;
    value_findings(rec.info, s.count, s.nan_count, s.posinf_count, s.neginf_count, s.zero_count, s.min, s.max);
  }

  void value_findings(const TensorInfo& t, uint64_t n, uint64_t nan, uint64_t pinf, uint64_t ninf, uint64_t zeros,
                      double mn, double mx) {
    if (nan + pinf + ninf > 0)
      find(t, "nonfinite", fmt::format("{} NaN, {} +Inf, {} -Inf of {} elements", nan, pinf, ninf, n),
           static_cast<double>(nan + pinf + ninf));
    if (t.role != Role::output || n < 2) return;
    if (zeros == n) find(t, "all_zero", fmt::format("all {} elements are zero", n), static_cast<double>(n));
    else if (nan + pinf + ninf == 0 && mn == mx)
      find(t, "constant", fmt::format("all {} elements equal {}", n, compare_detail::fmt_num(mn, 7)), mn);
    if (t.dtype == DType::f16 && nan + pinf + ninf < n) {
      double m = std::max(std::fabs(mn), std::fabs(mx));
      if (m >= o_.f16_near_overflow)
        find(t, "f16_near_overflow",
             fmt::format("max |x| = {} in float16 (largest finite 65504; the limit is {})",
                         compare_detail::fmt_num(m, 6), compare_detail::fmt_num(o_.f16_near_overflow, 6)),
             m);
    }
  }

  void tensor_checks(const Record& rec) {
    const TensorInfo& t = rec.info;
    if (!r_.integrity().checksums_verified) {
      if (auto v = r_.verify_payload(rec); !v) {
        rep_.warnings.push_back(fmt::format("{}: not checked: {}", who(t), v.error().to_string()));
        return;
      }
    }
    const uint64_t n = t.numel();
    ++rep_.tensors_checked;
    const size_t rank = t.shape.size();

    // Which slice statistics this tensor needs.
    std::vector<SliceSums> slices;
    bool testing = false;  // (plain values: GCC's maybe-uninitialized misreads optionals here)
    SliceTest test = SliceTest::layer_norm;
    std::vector<uint32_t> declared;
    const bool out0 = t.role == Role::output && t.role_index == 0;
    if (out0 && dtype_is_float(t.dtype)) {
      std::string_view na = attr(t, "norm_axes"), sa = attr(t, "softmax_axis");
      std::string kind = lower(attr(t, "norm_kind"));
      if (!na.empty() && wanted("norm_axis")) {
        if (attr(t, "norm_affine") == "true") ++skipped_["norm_axis not judged: learned scale/shift hide the statistics (norm_affine=true)"];
        else if (auto a = parse_axes(na, t)) {
          declared = *a;
          bool rms = kind == "rms" || (kind.empty() && lower(t.op_type).find("rms") != std::string::npos);
          test = rms ? SliceTest::rms_norm : SliceTest::layer_norm;
          testing = true;
        } else ++skipped_["norm_axis not judged: norm_axes names no axis of the tensor"];
      } else if (!sa.empty() && wanted("softmax_axis")) {
        if (auto a = parse_axes(sa, t); a && a->size() == 1) {
          declared = *a;
          test = SliceTest::softmax;
          testing = true;
        } else ++skipped_["softmax_axis not judged: softmax_axis names no single axis of the tensor"];
      }
      uint64_t len = 1;
      for (uint32_t a : declared) len *= t.shape[a];
      if (testing && (len == 0 || n / len > kMaxSlices)) {
        ++skipped_[fmt::format("norm_axis/softmax_axis not judged: more than {} slices", kMaxSlices)];
        testing = false;
      }
      // The other axes are measured only when the declared one fails (a second pass).
      if (testing) slices.emplace_back(t.shape, declared);
    }
    bool has_ch = false;
    uint32_t ch = 0;
    std::vector<uint64_t> nonzero_per_channel;
    if (out0 && dtype_is_float(t.dtype) && wanted("dead_channels")) {
      if (auto c = channel_axis(t); c && t.shape[*c] >= 2 && n / t.shape[*c] >= 2) {
        has_ch = true;
        ch = *c;
        nonzero_per_channel.assign(t.shape[ch], 0);
      }
    }

    uint64_t nan = 0, pinf = 0, ninf = 0, zeros = 0;
    double mn = HUGE_VAL, mx = -HUGE_VAL;
    std::vector<double> buf;
    std::vector<uint64_t> coords(rank, 0);
    const bool need_coords = !slices.empty() || has_ch;
    for (uint64_t first = 0; first < n; first += kChunk) {
      buf.resize(std::min(kChunk, n - first));
      if (auto d = decode(t, rec.payload, first, buf); !d) {
        rep_.warnings.push_back(fmt::format("{}: not checked: {}", who(t), d.error().to_string()));
        --rep_.tensors_checked;
        return;
      }
      for (double v : buf) {
        if (std::isnan(v)) ++nan;
        else if (std::isinf(v)) ++(v > 0 ? pinf : ninf);
        else {
          zeros += v == 0;
          mn = std::min(mn, v);
          mx = std::max(mx, v);
        }
        if (need_coords) {
          if (std::isfinite(v)) {
            for (auto& s : slices) s.add(coords, v);
            if (has_ch && v != 0) ++nonzero_per_channel[coords[ch]];
          } else if (has_ch) {
            ++nonzero_per_channel[coords[ch]];  // a NaN channel is not a dead one
          }
          for (size_t i = rank; i-- > 0;) {
            if (++coords[i] < t.shape[i]) break;
            coords[i] = 0;
          }
        }
      }
    }
    value_findings(t, n, nan, pinf, ninf, zeros, mn, mx);
    if (zeros == n) return;  // an all-zero output says it all

    if (has_ch) {
      std::vector<uint64_t> dead;
      for (uint64_t c = 0; c < nonzero_per_channel.size(); ++c)
        if (nonzero_per_channel[c] == 0) dead.push_back(c);
      if (!dead.empty()) {
        std::vector<uint64_t> shown(dead.begin(), dead.begin() + std::min<size_t>(dead.size(), 8));
        find(t, "dead_channels",
             fmt::format("{} of {} channels along {} are zero at every one of their {} positions (channels {}{})",
                         dead.size(), nonzero_per_channel.size(), axis_text(t, {ch}), n / nonzero_per_channel.size(),
                         fmt::join(shown, ", "), dead.size() > shown.size() ? ", ..." : ""),
             static_cast<double>(dead.size()));
      }
    }
    if (testing) slice_findings(t, rec.payload, test, slices[0]);
    if ((t.dtype == DType::i8 || t.dtype == DType::u8) && t.role == Role::output) saturation(t, rec.payload);
  }

  // Slice sums along one axis, from a fresh decoding pass; nullopt when too many slices.
  static std::optional<SliceSums> along(const TensorInfo& t, std::span<const std::byte> payload, uint32_t axis) {
    const uint64_t n = t.numel();
    if (t.shape[axis] < 2 || n / t.shape[axis] > kMaxSlices) return std::nullopt;
    SliceSums s(t.shape, {axis});
    std::vector<double> buf;
    std::vector<uint64_t> coords(t.shape.size(), 0);
    for (uint64_t first = 0; first < n; first += kChunk) {
      buf.resize(std::min(kChunk, n - first));
      if (!decode(t, payload, first, buf)) return std::nullopt;
      for (double v : buf) {
        if (std::isfinite(v)) s.add(coords, v);
        for (size_t i = coords.size(); i-- > 0;) {
          if (++coords[i] < t.shape[i]) break;
          coords[i] = 0;
        }
      }
    }
    return s;
  }

  void slice_findings(const TensorInfo& t, std::span<const std::byte> payload, SliceTest test,
                      const SliceSums& declared) {
    double tol = test == SliceTest::softmax ? o_.softmax_tolerance : o_.norm_tolerance;
    if (t.dtype == DType::f16 || t.dtype == DType::bf16 || t.dtype == DType::f8e4m3fn || t.dtype == DType::f8e5m2)
      tol *= 10;
    const double bad = bad_fraction(declared, test, tol);
    if (!(bad > o_.bad_slice_fraction)) return;
    std::vector<uint32_t> instead;
    for (uint32_t a = 0; a < t.shape.size(); ++a) {
      if (declared.axes.size() == 1 && declared.axes[0] == a) continue;
      auto other = along(t, payload, a);
      if (other && bad_fraction(*other, test, tol) <= o_.bad_slice_fraction) instead.push_back(a);
    }
    const std::string what = test == SliceTest::softmax ? "does not sum to one along the declared"
                             : test == SliceTest::rms_norm ? "is not RMS-normalised (mean square 1) along the declared"
                                                           : "is not normalised (mean 0, variance 1) along the declared";
    std::string msg = fmt::format("{} {} in {:.0f}% of its slices (tolerance {})", what, axis_text(t, declared.axes),
                                  bad * 100, compare_detail::fmt_num(tol, 3));
    if (!instead.empty())
      msg += fmt::format("; it {} along {} instead", test == SliceTest::softmax ? "sums to one" : "is normalised",
                         axis_text(t, instead));
    find(t, test == SliceTest::softmax ? "softmax_axis" : "norm_axis", msg, bad);
  }

  void saturation(const TensorInfo& t, std::span<const std::byte> payload) {
    if (!wanted("int8_saturation")) return;
    const bool s8 = t.dtype == DType::i8;
    const int lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    // An extreme that is the zero point encodes 0.0 (a ReLU output's floor), not saturation.
    bool count_lo = true, count_hi = true;
    for (int64_t zp : t.encoding.zero_points) {
      if (zp == lo) count_lo = false;
      if (zp == hi) count_hi = false;
    }
    uint64_t at = 0;
    for (std::byte b : payload) {
      int v = s8 ? static_cast<int>(static_cast<int8_t>(b)) : static_cast<int>(static_cast<uint8_t>(b));
      at += (count_lo && v == lo) || (count_hi && v == hi);
    }
    const double f = payload.empty() ? 0.0 : static_cast<double>(at) / static_cast<double>(payload.size());
    if (f > o_.saturation_fraction)
      find(t, "int8_saturation",
           fmt::format("{:.2f}% of {} elements sit at a saturating extreme ({}{}{}; limit {:.2f}%)", f * 100,
                       payload.size(), count_lo ? std::to_string(lo) : "", count_lo && count_hi ? " or " : "",
                       count_hi ? std::to_string(hi) : "", o_.saturation_fraction * 100),
           f);
  }

  std::string summary() const {
    if (rep_.tensors_checked == 0)
      return fmt::format("NOTHING CHECKED: the dump holds no readable tensor ({} records, {})", rep_.records, rep_.state);
    if (rep_.findings.empty())
      return fmt::format("CLEAN: {} tensors checked, no findings ({} records, {})", rep_.tensors_checked,
                         rep_.records, rep_.state);
    // Distinct names by sorting (n log n for any names): a search of the names seen so far made
    // 320k findings take 83 s.
    std::vector<std::string_view> names;
    names.reserve(rep_.findings.size());
    for (const auto& f : rep_.findings) names.push_back(f.name);
    std::sort(names.begin(), names.end());
    const size_t tensors = static_cast<size_t>(std::unique(names.begin(), names.end()) - names.begin());
    const auto& f = rep_.findings.front();
    return fmt::format("FINDINGS: {} in {} of {} tensors checked; first: {} at {}: {}", rep_.findings.size(),
                       tensors, rep_.tensors_checked, f.code, f.name, f.message);
  }
};

}  // namespace

std::string_view CheckReport::verdict() const noexcept {
  if (tensors_checked == 0) return "nothing_checked";
  return findings.empty() ? "clean" : "findings";
}

int CheckReport::exit_code() const noexcept {
  if (tensors_checked == 0) return 2;
  return findings.empty() ? 0 : 1;
}

namespace {

constexpr OptionSpec kCheckSpecs[] = {DRIFTSCOPE_CHECK_OPTIONS(DRIFTSCOPE_OPTION_SETTINGS_SPEC_)
                                          DRIFTSCOPE_CHECK_COMMAND(DRIFTSCOPE_OPTION_COMMAND_SPEC_)};

// The words of a row's choices ("a,b,c").
std::vector<std::string_view> choices_of(std::string_view choices) {
  std::vector<std::string_view> words;
  for (size_t pos = 0; pos < choices.size();) {
    size_t comma = std::min(choices.find(',', pos), choices.size());
    words.push_back(choices.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return words;
}

// A number row's range; a list row's allowed words (when it has choices). The other pass skips
// each kind, so all ranges are checked before any word, as the messages were ordered before.
Result<void> check_range(std::string_view key, double v, double lo, double hi) {
  std::string p = compare_detail::range_problem(key, v, lo, hi);
  if (!p.empty()) return make_error(Errc::invalid_argument, "check option " + p);
  return {};
}
Result<void> check_range(std::string_view, const std::vector<std::string>&, double, double) { return {}; }
Result<void> check_words(std::string_view, double, std::string_view) { return {}; }
Result<void> check_words(std::string_view key, const std::vector<std::string>& given, std::string_view choices) {
  if (choices.empty()) return {};
  const std::vector<std::string_view> allowed = choices_of(choices);
  for (const auto& c : given)
    if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
      return make_error(Errc::invalid_argument, fmt::format("check option '{}': unknown finding code '{}', allowed: {}",
                                                            key, c, fmt::join(allowed, ", ")));
  return {};
}

}  // namespace

std::span<const OptionSpec> check_option_specs() noexcept { return kCheckSpecs; }

// Ranges and allowed words are the rows' (the ones --help, the docs and Python show).
Result<void> CheckOptions::validate() const {
#define DS_CHECK_RANGE_(type, name, def, flag, keyword, role, lo, hi, ...) \
  DRIFTSCOPE_TRY(check_range(#name, name, lo, hi));
#define DS_CHECK_WORDS_(type, name, def, flag, keyword, role, lo, hi, choices, ...) \
  DRIFTSCOPE_TRY(check_words(#name, name, choices));
  DRIFTSCOPE_CHECK_OPTIONS(DS_CHECK_RANGE_)
  DRIFTSCOPE_CHECK_OPTIONS(DS_CHECK_WORDS_)
#undef DS_CHECK_RANGE_
#undef DS_CHECK_WORDS_
  return {};
}

Result<CheckReport> check(const Reader& reader, const CheckOptions& options) {
  DRIFTSCOPE_TRY(options.validate());
  return Checker(reader, options).run();
}

Result<CheckReport> check_file(const std::string& path, const CheckOptions& options) {
  DRIFTSCOPE_TRY(options.validate());
  OpenOptions o;
  o.verify = Verify::frames;
  auto r = Reader::open(path, o);
  if (!r) return std::move(r).error();  // the caller names the file (the CLI: "PATH: code: ...")
  auto rep = Checker(*r, options).run();
  if (rep) rep->path = path;
  return rep;
}

}  // namespace driftscope
