// Checks by axis name (docs/axes.md §3.1). The recorder carries names through the data flow and
// writes what it saw as facts (the `axes_ops` attribute: an op's kind, its operands' names and
// sizes, the axes it worked along, and where the names came from); this is the one place that
// decides which facts are findings, for check and for compare alike.
#include "judge/axes_checks.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "common/thread_pool.hpp"
#include "driftscope/dumpset.hpp"
#include "format/record_table.hpp"

namespace driftscope::compare_detail {

std::string lowered(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view attr_value(const TensorInfo& t, std::string_view key) {
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

std::optional<std::vector<uint32_t>> parse_axis_list(std::string_view v, const TensorInfo& t) {
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

namespace {

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

bool named(std::string_view n) { return !n.empty() && n != "?"; }

std::string names_text(const std::vector<std::string>& n) {
  std::vector<std::string> v;
  for (const auto& x : n) v.push_back(named(x) ? x : "?");
  return fmt::format("{}", fmt::join(v, ","));
}
std::string from_text(std::string_view trail) {
  return trail.empty() ? std::string() : fmt::format("; names from: {}", trail);
}

}  // namespace

std::optional<AxesEvent> parse_axes_event(std::string_view line) {
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

bool has_axes_facts(const TensorInfo& t) {
  for (const auto& [k, v] : t.attrs)
    if (k == "axes_ops" || (!t.axes.empty() && (k == "norm_axes" || k == "softmax_axis"))) return true;
  return false;
}

// norm_over, softmax_over, reduce_over_batch, broadcast_conflict, concat_mismatch: from the record's own
// names and reserved attributes, and from the ops the recorder saw inside it (`axes_ops`).
// At most one finding per code per record.
AxesJudgement judge_axes(const TensorInfo& t, std::span<const std::string> ignore) {
  AxesJudgement out;
  std::set<std::string, std::less<>> done;
  auto emit = [&](std::string code, std::string msg, double v) {
    if (std::find(ignore.begin(), ignore.end(), code) != ignore.end() || !done.insert(code).second) return;
    out.findings.push_back({std::move(code), std::move(msg), v});
  };
  auto not_feature = [](std::string_view n) {
    std::string b = lowered(axis_base(n));
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
    std::string b = lowered(axis_base(names[a]));
    if (b == "query" || is_batch(b))
      emit("softmax_over",
           fmt::format("{} normalises over {} (axis {} of {}){}{}", op, names[a], a, names_text(names),
                       b == "query" ? ": attention probabilities sum to one over the key axis" : "",
                       from_text(trail)),
           static_cast<double>(a));
  };
  std::vector<std::string> own(t.axes.begin(), t.axes.end());
  std::string_view own_trail = attr_value(t, "axes_from");
  std::string_view ops = attr_value(t, "axes_ops");
  if (!ops.empty()) {
    for (const auto& line : split_on(ops, '\n')) {
      auto e = parse_axes_event(line);
      if (!e) {
        out.malformed = true;
        continue;
      }
      if (e->kind == "norm") judge_norm(e->op, e->names, e->axes, e->trail);
      else if (e->kind == "softmax" && e->axes.size() == 1) judge_softmax(e->op, e->names, e->axes[0], e->trail);
      else if (e->kind == "reduce") {
        for (uint32_t a : e->axes)
          if (named(e->names[a]) && is_batch(lowered(axis_base(e->names[a])))) {
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
  if (own.size() != t.shape.size() || own.empty()) return out;
  // The record's own reserved attributes (any recorder: ONNX norm/softmax outputs with dim_param names).
  std::string_view na = attr_value(t, "norm_axes"), sa = attr_value(t, "softmax_axis");
  if (!na.empty())
    if (auto a = parse_axis_list(na, t)) judge_norm(t.op_type, own, *a, own_trail);
  if (!sa.empty())
    if (auto a = parse_axis_list(sa, t); a && a->size() == 1) judge_softmax(t.op_type, own, (*a)[0], own_trail);
  return out;
}

}  // namespace driftscope::compare_detail
