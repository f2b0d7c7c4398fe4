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

#include "compare/internal.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/text.hpp"

namespace driftscope {
namespace {

constexpr uint64_t kChunk = uint64_t{1} << 16;
// Slice statistics keep 24 bytes per slice: at most this many slices per axis (96 MiB).
constexpr uint64_t kMaxSlices = uint64_t{1} << 22;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view attr(const TensorInfo& t, std::string_view key) {
  for (const auto& [k, v] : t.attrs)
    if (k == key) return v;
  return {};
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string_view::npos) end = v.size();
    std::string item(v.substr(start, end - start));
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

// "-1", "2", "-2,-1" (negative counts from the last axis), or axis names. nullopt: malformed.
std::optional<std::vector<uint32_t>> parse_axes(std::string_view v, const TensorInfo& t) {
  std::vector<uint32_t> out;
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  for (const auto& item : split_list(v)) {
    int64_t a = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), a);
    if (ec != std::errc() || p != item.data() + item.size()) {
      // By base name: `hidden@tp` is the axis `hidden` of a shard (docs/dumpsets.md §4).
      auto it = std::find_if(t.axes.begin(), t.axes.end(), [&](const std::string& x) { return axis_base(x) == item; });
      if (it == t.axes.end()) return std::nullopt;
      a = it - t.axes.begin();
    }
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    if (std::find(out.begin(), out.end(), static_cast<uint32_t>(a)) == out.end())
      out.push_back(static_cast<uint32_t>(a));
  }
  if (out.empty()) return std::nullopt;
  std::sort(out.begin(), out.end());
  return out;
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

// -- checks by axis name (docs/axes.md §3.1) -----------------------------------------------------
// The recorder carries names through the data flow and writes what it saw as facts (the
// `axes_ops` attribute: an op's kind, its operands' names and sizes, the axes it worked along,
// and where the names came from); this is the one place that decides which facts are findings.

// Axes a normalisation must not run over: they index samples or positions, not features (the
// spellings of ONNX exports' dim_params included).
constexpr std::string_view kNotFeature[] = {"batch", "batch_size", "seq", "sequence", "sequence_length", "seq_len",
                                            "key", "query", "time", "heads", "tokens"};
bool is_batch(std::string_view lowered_base) { return lowered_base == "batch" || lowered_base == "batch_size"; }
// Name pairs that meet in a broadcast without conflict: query/key are seq's roles in attention
// (python/driftscope/recorders/axes_rules.py, COMPATIBLE, holds the same pairs).
bool compatible(std::string_view a, std::string_view b) {
  auto pair = [&](std::string_view x, std::string_view y) { return (a == x && b == y) || (a == y && b == x); };
  return pair("seq", "key") || pair("seq", "query");
}

std::vector<std::string> split_on(std::string_view v, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(sep, start);
    if (end == std::string_view::npos) end = v.size();
    out.emplace_back(v.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// One `axes_ops` entry: kind, op, names, sizes, axes, names2, sizes2, trail (tab-separated).
struct AxesEvent {
  std::string kind, op, trail;
  std::vector<std::string> names, names2;  // "?" or "": unnamed
  std::vector<uint64_t> sizes, sizes2;
  std::vector<uint32_t> axes;
};

std::optional<std::vector<uint64_t>> parse_uints(std::string_view v) {
  std::vector<uint64_t> out;
  if (v.empty()) return out;
  for (const auto& item : split_on(v, ',')) {
    uint64_t x = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (ec != std::errc() || p != item.data() + item.size()) return std::nullopt;
    out.push_back(x);
  }
  return out;
}

// nullopt: malformed (a producer's free text under a reserved key: ignored, counted in a note).
std::optional<AxesEvent> parse_event(std::string_view line) {
  auto f = split_on(line, '\t');
  if (f.size() != 8) return std::nullopt;
  AxesEvent e;
  e.kind = f[0];
  e.op = f[1];
  e.names = f[2].empty() ? std::vector<std::string>{} : split_on(f[2], ',');
  e.names2 = f[5].empty() ? std::vector<std::string>{} : split_on(f[5], ',');
  auto s1 = parse_uints(f[3]), ax = parse_uints(f[4]), s2 = parse_uints(f[6]);
  if (!s1 || !ax || !s2 || s1->size() != e.names.size() || s2->size() != e.names2.size()) return std::nullopt;
  e.sizes = *s1;
  e.sizes2 = *s2;
  for (uint64_t a : *ax) {
    if (a >= e.names.size()) return std::nullopt;
    e.axes.push_back(static_cast<uint32_t>(a));
  }
  e.trail = f[7];
  return e;
}

bool named(std::string_view n) { return !n.empty() && n != "?"; }

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

  static std::string names_text(const std::vector<std::string>& n) {
    std::vector<std::string> v;
    for (const auto& x : n) v.push_back(named(x) ? x : "?");
    return fmt::format("{}", fmt::join(v, ","));
  }
  static std::string from_text(std::string_view trail) {
    return trail.empty() ? std::string() : fmt::format("; names from: {}", trail);
  }

  // norm_over, softmax_over, reduce_over_batch, broadcast_conflict, concat_mismatch: from the record's own
  // names and reserved attributes, and from the ops the recorder saw inside it (`axes_ops`).
  // At most one finding per code per record.
  void axes_findings(const TensorInfo& t) {
    std::set<std::string, std::less<>> done;
    auto emit = [&](std::string code, std::string msg, double v) {
      if (!wanted(code) || !done.insert(code).second) return;
      find(t, std::move(code), std::move(msg), v);
    };
    auto not_feature = [](std::string_view n) {
      std::string b = lower(axis_base(n));
      return std::find(std::begin(kNotFeature), std::end(kNotFeature), b) != std::end(kNotFeature);
    };
    auto judge_norm = [&](std::string_view op, const std::vector<std::string>& names,
                          const std::vector<uint32_t>& axes, std::string_view trail) {
      for (uint32_t a : axes)
        if (a < names.size() && named(names[a]) && not_feature(names[a]))
          return emit("norm_over",
                      fmt::format("{} normalises over {} (axis {} of {}), not the feature axis{}", op, names[a], a,
                                  names_text(names), from_text(trail)),
                      static_cast<double>(a));
    };
    auto judge_softmax = [&](std::string_view op, const std::vector<std::string>& names, uint32_t a,
                             std::string_view trail) {
      if (a >= names.size() || !named(names[a])) return;
      std::string b = lower(axis_base(names[a]));
      if (b == "query" || is_batch(b))
        emit("softmax_over",
             fmt::format("{} normalises over {} (axis {} of {}){}{}", op, names[a], a, names_text(names),
                         b == "query" ? ": attention probabilities sum to one over the key axis" : "",
                         from_text(trail)),
             static_cast<double>(a));
    };
    std::vector<std::string> own(t.axes.begin(), t.axes.end());
    std::string_view own_trail = attr(t, "axes_from");
    std::string_view ops = attr(t, "axes_ops");
    size_t bad = 0;
    if (!ops.empty()) {
      for (const auto& line : split_on(ops, '\n')) {
        auto e = parse_event(line);
        if (!e) {
          ++bad;
          continue;
        }
        if (e->kind == "norm") judge_norm(e->op, e->names, e->axes, e->trail);
        else if (e->kind == "softmax" && e->axes.size() == 1) judge_softmax(e->op, e->names, e->axes[0], e->trail);
        else if (e->kind == "reduce") {
          for (uint32_t a : e->axes)
            if (named(e->names[a]) && is_batch(lower(axis_base(e->names[a])))) {
              emit("reduce_over_batch",
                   fmt::format("{} reduces over batch (axis {} of {}) inside the model: each sample's result depends "
                               "on the others{}", e->op, a, names_text(e->names), from_text(e->trail)),
                   static_cast<double>(a));
              break;
            }
        } else if (e->kind == "concat" && e->names.size() == e->names2.size() && e->axes.size() == 1) {
          for (size_t k = 0; k < e->names.size(); ++k) {
            const std::string &x = e->names[k], &y = e->names2[k];
            if (!named(x) || !named(y) || axis_base(x) == axis_base(y)) continue;
            emit("concat_mismatch",
                 fmt::format("{} along axis {} joins parts whose axis {} is {} on one side and {} on the other: {} "
                             "with {}{}", e->op, e->axes[0], k, x, y, names_text(e->names), names_text(e->names2),
                             from_text(e->trail)),
                 static_cast<double>(k));
            break;
          }
        } else if (e->kind == "broadcast") {
          const size_t n = std::min(e->names.size(), e->names2.size());
          for (size_t k = 1; k <= n; ++k) {
            const std::string& x = e->names[e->names.size() - k];
            const std::string& y = e->names2[e->names2.size() - k];
            const uint64_t sx = e->sizes[e->sizes.size() - k], sy = e->sizes2[e->sizes2.size() - k];
            if (!named(x) || !named(y) || sx != sy || sx <= 1) continue;
            std::string bx = axis_base(x), by = axis_base(y);
            if (bx == by || compatible(bx, by)) continue;
            emit("broadcast_conflict",
                 fmt::format("{} meets {} with {} (both size {}) at axis -{}: {} with {}; a same-size axis of "
                             "another meaning broadcast silently{}",
                             e->op, x, y, sx, k, names_text(e->names), names_text(e->names2), from_text(e->trail)),
                 static_cast<double>(sx));
            break;
          }
        }
      }
    }
    if (bad) ++skipped_["axes_ops not judged: malformed entries"];
    if (own.size() != t.shape.size() || own.empty()) return;
    // The record's own reserved attributes (any recorder: ONNX norm/softmax outputs with dim_param names).
    std::string_view na = attr(t, "norm_axes"), sa = attr(t, "softmax_axis");
    if (!na.empty())
      if (auto a = parse_axes(na, t)) judge_norm(t.op_type, own, *a, own_trail);
    if (!sa.empty())
      if (auto a = parse_axes(sa, t); a && a->size() == 1) judge_softmax(t.op_type, own, (*a)[0], own_trail);
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
    if (!rec.summary) return;
    ++rep_.tensors_checked;
    const TensorStats& s = rec.summary->stats;
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

Result<void> CheckOptions::validate() const {
  auto range = [](std::string_view key, double v, double lo, double hi) -> Result<void> {
    std::string p = compare_detail::range_problem(key, v, lo, hi);
    if (!p.empty()) return make_error(Errc::invalid_argument, "check option " + p);
    return {};
  };
  DRIFTSCOPE_TRY(range("norm_tolerance", norm_tolerance, 0, 1e6));
  DRIFTSCOPE_TRY(range("softmax_tolerance", softmax_tolerance, 0, 1e6));
  DRIFTSCOPE_TRY(range("bad_slice_fraction", bad_slice_fraction, 0, 1));
  DRIFTSCOPE_TRY(range("f16_near_overflow", f16_near_overflow, 0, 65504));
  DRIFTSCOPE_TRY(range("saturation_fraction", saturation_fraction, 0, 1));
  static constexpr std::string_view kCodes[] = {"nonfinite", "all_zero", "constant", "dead_channels",
                                                "f16_near_overflow", "int8_saturation", "norm_axis",
                                                "softmax_axis", "axis_size", "norm_over",
                                                "softmax_over", "reduce_over_batch", "broadcast_conflict",
                                                "concat_mismatch"};
  for (const auto& c : ignore)
    if (std::find(std::begin(kCodes), std::end(kCodes), c) == std::end(kCodes))
      return make_error(Errc::invalid_argument,
                        fmt::format("check option 'ignore': unknown finding code '{}', allowed: {}", c,
                                    fmt::join(kCodes, ", ")));
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
