// driftscope show FILE NAME: one tensor's description, statistics and values (issue 2 §5).
#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct ShowArgs {
  std::string file;
  std::string name;
  std::optional<uint32_t> occurrence;
  std::string role;
  std::optional<uint16_t> role_index;
  uint64_t limit = 1000;
  uint64_t edge = 3;
};

std::optional<Role> parse_role(std::string_view s) {
  for (Role r : {Role::output, Role::input, Role::parameter, Role::other})
    if (role_name(r) == s) return r;
  if (s == "param") return Role::parameter;
  return std::nullopt;
}

// Levenshtein distance for "did you mean" on a mistyped tensor name, or `bound + 1` as soon as it
// must exceed `bound`: only the band |i - j| <= bound of the table is computed, so one call costs
// O(|a| * bound), not O(|a| * |b|).
size_t edit_distance(std::string_view a, std::string_view b, size_t bound) {
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > bound) return bound + 1;
  const size_t inf = bound + 1;
  std::vector<size_t> row(b.size() + 1, inf);
  for (size_t j = 0; j <= std::min(b.size(), bound); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t from = i > bound ? i - bound : 1, to = std::min(b.size(), i + bound);
    size_t diag = row[from - 1];
    row[from - 1] = from == 1 && i <= bound ? i : inf;
    size_t best = row[from - 1];
    for (size_t j = from; j <= to; ++j) {
      size_t up = row[j];
      row[j] = std::min({up + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1), inf});
      diag = up;
      best = std::min(best, row[j]);
    }
    if (to < b.size()) row[to + 1] = inf;
    if (best > bound) return inf;
  }
  return std::min(row[b.size()], inf);
}

// Up to three names close to `name`, closest first (earlier in the file on ties). Linear in the
// number of records: each distinct name is looked at once (a hash set, not a scan of the names
// seen so far), and once three are found only a strictly closer name can enter, so the distance
// bound, and with it the cost of each comparison, shrinks as the search goes.
std::string suggestions(const Reader& r, std::string_view name) {
  const size_t bound = std::max<size_t>(2, name.size() / 3);
  std::vector<std::pair<size_t, std::string_view>> best;  // at most 3, by distance
  std::unordered_set<std::string_view> seen;
  for (const Record& rec : r.records()) {
    std::string_view n = rec.info.name;
    if (!seen.insert(n).second) continue;
    if (best.size() == 3 && best.back().first == 0) break;
    const size_t limit = best.size() == 3 ? best.back().first - 1 : bound;
    size_t d = n.find(name) != std::string_view::npos ? 0 : edit_distance(n, name, limit);
    if (d > limit) continue;
    auto at = std::upper_bound(best.begin(), best.end(), d,
                               [](size_t v, const auto& e) { return v < e.first; });
    best.insert(at, {d, n});
    if (best.size() > 3) best.pop_back();
  }
  std::string s;
  for (size_t i = 0; i < best.size(); ++i)
    s += fmt::format("{}{}", i ? ", " : "; did you mean ", quote(best[i].second));
  if (!s.empty()) s += '?';
  return s;
}

std::string identity(const Record& r) {
  return fmt::format("occurrence {} {}", r.info.occurrence,
                     fmt_role(r.info.role, r.info.role_index, true));
}

// The value of element `flat` as text: integers exactly (an i64 is not always a double),
// floats and dequantized values through decode(), as the shortest decimal that reads back as
// the same value of the stored dtype.
Result<std::string> element_text(const Record& rec, uint64_t flat) {
  const TensorInfo& t = rec.info;
  size_t size = dtype_size(t.dtype);
  const std::byte* p = rec.payload.data() + flat * size;
  if (t.encoding.kind == EncodingKind::raw) {
    switch (t.dtype) {
      case DType::boolean: return std::string(static_cast<uint8_t>(*p) ? "true" : "false");
      case DType::i64: return std::to_string(load_le<int64_t>(p));
      case DType::i32: return std::to_string(load_le<int32_t>(p));
      case DType::i16: return std::to_string(load_le<int16_t>(p));
      case DType::i8: return std::to_string(load_le<int8_t>(p));
      case DType::u64: return std::to_string(load_le<uint64_t>(p));
      case DType::u32: return std::to_string(load_le<uint32_t>(p));
      case DType::u16: return std::to_string(load_le<uint16_t>(p));
      case DType::u8: return std::to_string(load_le<uint8_t>(p));
      default: break;
    }
  }
  double v = 0;
  DRIFTSCOPE_TRY(decode(t, rec.payload, flat, std::span<double>(&v, 1)));
  // Dequantized values are computed in double (docs/format.md §3.3.2): exact as a double.
  return fmt_exact(v, t.encoding.kind == EncodingKind::raw ? t.dtype : DType::f64);
}

int run_show(const ShowArgs& a) {
  std::optional<Role> role;
  if (!a.role.empty()) {
    role = parse_role(a.role);
    if (!role)
      return fail(fmt::format("--role: {} is not one of output, input, parameter, other",
                              quote(a.role)));
  }
  auto opened = Reader::open(a.file);
  if (!opened) return fail(a.file, opened.error());
  const Reader& r = *opened;
  warn_damage(a.file, r);

  std::vector<const Record*> all = r.find_all(a.name);
  if (all.empty())
    return fail(fmt::format("{}: not_found: no tensor named {}{}", a.file, quote(a.name),
                            suggestions(r, a.name)));
  std::vector<const Record*> match;
  for (const Record* rec : all)
    if ((!a.occurrence || rec->info.occurrence == *a.occurrence) &&
        (!role || rec->info.role == *role) &&
        (!a.role_index || rec->info.role_index == *a.role_index))
      match.push_back(rec);
  if (match.empty()) {
    std::string have;
    for (size_t i = 0; i < all.size() && i < 8; ++i)
      have += fmt::format("{}{}", i ? "; " : "", identity(*all[i]));
    if (all.size() > 8) have += fmt::format("; and {} more", all.size() - 8);
    return fail(fmt::format("{}: not_found: tensor {} has no record with the requested "
                            "occurrence/role (it has: {})", a.file, quote(a.name), have));
  }
  const Record& rec = *match.front();
  if (match.size() > 1)
    note(fmt::format("{} has {} matching records; showing the first ({}); choose one with "
                     "--occurrence, --role, --role-index", quote(a.name), match.size(),
                     identity(rec)));

  const TensorInfo& t = rec.info;
  // Every row may quote the file (name, op, axes, attributes): one escaping rule for all.
  auto row = [](std::string_view key, const std::string& value) {
    fmt::print("{:<11} {}\n", key, printable(value));
  };
  row("name", t.name);
  row("index", std::to_string(t.exec_index));
  row("occurrence", std::to_string(t.occurrence));
  row("role", fmt_role(t.role, t.role_index, true));
  row("kind", std::string(kind_name(rec.kind)));
  row("op", t.op_type.empty() ? "-" : t.op_type);
  row("dtype", std::string(dtype_name(t.dtype)));
  row("shape", fmt::format("{} ({} element{})", fmt_shape(t.shape, false), fmt_count(t.numel()),
                           t.numel() == 1 ? "" : "s"));
  row("axes", t.axes.empty() ? "-" : join_axes(t.axes));
  switch (t.encoding.kind) {
    case EncodingKind::raw: row("encoding", "raw"); break;
    case EncodingKind::affine_tensor:
      row("encoding", fmt::format("affine per tensor: value = {} * (q - {})",
                                  fmt_exact(t.encoding.scales.at(0), DType::f64), t.encoding.zero_points.at(0)));
      break;
    case EncodingKind::affine_channel:
      row("encoding", fmt::format("affine per channel along axis {} ({} scales)", t.encoding.axis,
                                  t.encoding.scales.size()));
      break;
  }
  for (const auto& [k, v] : t.attrs) row("attr", fmt::format("{} = {}", k, v));
  row("record", fmt::format("offset {}, {} bytes; payload at {}, {} bytes", rec.offset, rec.size,
                            rec.payload_offset, rec.payload.size()));
  auto st = record_stats(rec);
  if (!st) return fail(a.file, st.error());
  if (auto c = r.check_unchanged(); !c) return fail(a.file, c.error());
  const TensorStats& s = *st;
  row("stats", fmt::format("min {}  max {}  mean {}  std {}  l2 {}", fmt_num(s.min),
                           fmt_num(s.max), fmt_num(s.mean), fmt_num(s.std), fmt_num(s.l2_norm)));
  row("counts", fmt::format("nan {}  +inf {}  -inf {}  zero {}  of {}", s.nan_count,
                            s.posinf_count, s.neginf_count, s.zero_count, s.count));
  if (rec.kind == RecordKind::summary) {
    row("values", fmt::format("not stored (summary record, light mode); projection of {} "
                              "values, seed {}", rec.summary() ? rec.summary()->projection.size() : 0,
                              rec.summary() ? fmt_hex64(rec.summary()->projection_seed) : "-"));
    return kExitOk;
  }
  if (a.limit == 0) return kExitOk;

  if (t.numel() == 0) {
    // Before any selection: the other dims of a zero-element tensor may be huge ([2^40, 0]).
    row("values", "all 0 shown");
    fmt::print("(no elements)\n");
    return kExitOk;
  }

  // Which indices of each axis to print: all, or the first and last `edge` (numpy's
  // summarised printing) when the tensor has more than `limit` elements. -1 marks the gap.
  // Every loop below is bounded by what is printed (at most `cap` values), never by a dim:
  // numel > 0 here, so each dim is at most numel, yet numel can be far above what is printed.
  const uint64_t numel = t.numel();
  const size_t rank = t.shape.size();
  const bool summarised = numel > a.limit;
  // An edge past the limit prints no more than the limit does; 2^31 keeps 2 * edge exact.
  uint64_t edge = std::clamp<uint64_t>(a.edge, 1, std::min<uint64_t>(a.limit, uint64_t{1} << 31));
  auto kept = [&](uint64_t d, uint64_t e) { return summarised && d > 2 * e ? 2 * e : d; };
  auto count = [&](uint64_t e) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n = checked_mul(n, kept(d, e)).value_or(UINT64_MAX);
    return n;
  };
  if (summarised && count(edge) > a.limit) {
    // The widest edge whose selection fits the limit (the count grows with the edge), else 1.
    uint64_t lo = 1, hi = edge;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo + 1) / 2;
      if (count(mid) <= a.limit) lo = mid;
      else hi = mid - 1;
    }
    edge = lo;
  }
  const uint64_t printed = count(edge);
  // Stop after `cap` values: many small axes can still multiply past the limit at edge 1.
  const uint64_t cap = std::max<uint64_t>(a.limit, 2 * edge);
  std::vector<std::vector<int64_t>> picks(rank);
  for (size_t k = 0; k < rank; ++k) {
    // At most 2 * edge + 1 picks (summarised: <= 2 * limit + 1), else d <= numel <= limit.
    uint64_t d = t.shape[k];
    if (kept(d, edge) == d) {
      for (uint64_t i = 0; i < d; ++i) picks[k].push_back(static_cast<int64_t>(i));
    } else {
      for (uint64_t i = 0; i < edge; ++i) picks[k].push_back(static_cast<int64_t>(i));
      picks[k].push_back(-1);
      for (uint64_t i = d - edge; i < d; ++i) picks[k].push_back(static_cast<int64_t>(i));
    }
  }
  row("values", summarised ? fmt::format("{} of {} shown (first and last {} along each axis; "
                                         "--limit N prints up to N in full)",
                                         fmt_count(std::min(printed, cap)), fmt_count(numel), edge)
                           : fmt::format("all {} shown", fmt_count(numel)));

  struct Line {
    std::string prefix;
    std::vector<std::string> tokens;  // "..." for a gap
    std::vector<int64_t> cols;        // last-axis coordinate of each token, -1 for a gap
  };
  std::vector<Line> lines;
  std::vector<uint64_t> strides(rank, 1);
  for (size_t k = rank; k-- > 1;) strides[k - 1] = strides[k] * t.shape[k];
  uint64_t emitted = 0;
  bool stopped = false;
  std::vector<uint64_t> coord(rank, 0);
  std::string error;

  auto prefix_of = [&](size_t upto, const std::string& last) {
    std::string p = "[";
    for (size_t k = 0; k < upto; ++k) p += fmt::format("{}, ", coord[k]);
    return p + last + "]";
  };
  std::function<void(size_t)> walk = [&](size_t axis) {
    if (stopped || !error.empty()) return;
    if (axis + 1 == rank) {
      Line line{prefix_of(axis, ":"), {}, {}};
      for (int64_t i : picks[axis]) {
        if (i < 0) {
          line.tokens.emplace_back("...");
          line.cols.push_back(-1);
          continue;
        }
        if (emitted == cap) {
          stopped = true;
          break;
        }
        coord[axis] = static_cast<uint64_t>(i);
        uint64_t flat = 0;
        for (size_t k = 0; k < rank; ++k) flat += coord[k] * strides[k];
        auto v = element_text(rec, flat);
        if (!v) {
          error = v.error().to_string();
          return;
        }
        line.tokens.push_back(std::move(*v));
        line.cols.push_back(i);
        ++emitted;
      }
      lines.push_back(std::move(line));
      return;
    }
    for (int64_t i : picks[axis]) {
      if (i < 0) {
        lines.push_back({std::string(2 * (axis + 1), ' ') + "...", {}, {}});
        continue;
      }
      coord[axis] = static_cast<uint64_t>(i);
      walk(axis + 1);
      if (stopped) return;
    }
  };
  if (rank == 0) {
    auto v = element_text(rec, 0);
    if (!v) return fail(a.file, v.error());
    fmt::print("{}\n", *v);
    return kExitOk;
  }
  walk(0);
  if (!error.empty()) return fail(fmt::format("{}: {}", a.file, error));

  size_t vw = 0, pw = 0;
  for (const auto& l : lines) {
    if (!l.tokens.empty()) pw = std::max(pw, l.prefix.size());
    for (const auto& tok : l.tokens) vw = std::max(vw, tok.size());
  }
  size_t width = terminal_width();
  if (width == 0) width = 100;
  // Values per printed line: long rows wrap, each continuation line starting with the
  // coordinate of its first value.
  auto fit = [&] { return std::max<size_t>(1, (width > pw + 1 ? width - pw - 1 : 0) / (vw + 2)); };
  size_t per_line = fit();
  size_t longest = 0;
  for (const auto& l : lines) longest = std::max(longest, l.tokens.size());
  if (longest > per_line) {
    pw += std::to_string(t.shape[rank - 1]).size();  // room for "k:" in continuation prefixes
    per_line = fit();
  }
  for (const auto& l : lines) {
    if (l.tokens.empty()) {
      fmt::print("{}\n", l.prefix);
      continue;
    }
    for (size_t i = 0; i < l.tokens.size(); i += per_line) {
      size_t end = std::min(l.tokens.size(), i + per_line);
      std::string prefix = l.prefix;
      if (i > 0) {
        // "[i, j, :]" becomes "[i, j, k:]" where k is the first value on this line.
        int64_t first = -1;
        for (size_t j = i; j < end && first < 0; ++j) first = l.cols[j];
        if (first >= 0) prefix = l.prefix.substr(0, l.prefix.size() - 2) + fmt::format("{}:]", first);
      }
      std::string out = fmt::format("{:<{}}", prefix, pw);
      for (size_t j = i; j < end; ++j) out += fmt::format("  {:>{}}", l.tokens[j], vw);
      fmt::print("{}\n", out);
    }
  }
  if (stopped)
    fmt::print("... (stopped after {} values; raise --limit to see more)\n", fmt_count(cap));
  return kExitOk;
}

std::function<int()> setup_show(CLI::App& app) {
  auto a = std::make_shared<ShowArgs>();
  auto* sub = app.add_subcommand("show", "Print one tensor: description, statistics and values");
  sub->add_option("FILE", a->file, "the .tdump file")->required();
  sub->add_option("NAME", a->name, "the tensor's name (module path), as `driftscope ls` prints it")
      ->required();
  sub->add_option("-o,--occurrence", a->occurrence,
                  "which call of the module (0 = first); default: the first record of NAME");
  sub->add_option("-r,--role", a->role, "output, input, parameter or other");
  sub->add_option("--role-index", a->role_index, "which output/input/parameter of the module");
  sub->add_option("-n,--limit", a->limit,
                  "print all values of tensors with at most N elements, else summarise "
                  "(default 1000; 0 prints no values)");
  sub->add_option("--edge", a->edge, "values kept at each end of an axis when summarising (default 3)");
  sub->footer(R"HELP(
Prints where the record lies in the file, its statistics (min/max/mean/std of the finite
values, L2 norm, NaN/Inf/zero counts), then its values: one line per innermost row, each
starting with its coordinates, e.g. [0, 2, :] is row 2 of the first matrix. A tensor with
more than --limit elements is summarised like numpy does: the first and last --edge entries
of each axis, with "..." for the rest. Every value prints exactly: integers in full, floats
(f64, f32, f16, bf16, fp8) as the shortest decimal that reads back as the same value of their
dtype, quantized tensors as their dequantized value (a double) the same way.

Examples:
  driftscope show run.tdump encoder.layers.0.attn
  driftscope show run.tdump encoder.layers.0.attn --occurrence 1 --limit 0
  driftscope show run.tdump embeddings --role input --limit 100000)HELP");
  return [a] { return run_show(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(show, 30, setup_show);

}  // namespace driftscope::cli
