// Dump sets (docs/dumpsets.md): the manifest, its validation, and the shard annotations of axis
// names. Every rule here is a numbered rule of the spec; messages name the manifest key.
#include "driftscope/dumpset.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driftscope/file.hpp"

namespace driftscope {
namespace {

// ordered_json keeps the manifest's key order: the group order is what ds.coords uses.
using ojson = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;       // the manifest needs 4 levels; deeper is hostile (spec §2)
constexpr size_t kMaxGroups = 16;   // tp, pp, dp, ep, sp, cp and room to spare

bool is_group_name(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  auto head = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!head(s[0])) return false;
  for (char c : s.substr(1))
    if (!head(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

// nlohmann reports a byte position; people read line:column (1-based, columns in bytes).
std::string line_col(std::string_view text, size_t byte) {
  byte = std::min(byte, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

struct Bad {
  std::string origin;
  Error operator()(Errc c, std::string_view key, std::string_view what) const {
    return make_error(c, fmt::format("{}: key '{}': {}", origin, key, what));
  }
};

// Builds the manifest's document from nlohmann's SAX events, checking depth and duplicate keys on
// the way. nlohmann's own callback parser is quadratic here: closing an object scans its parent
// for a discarded element (100k ranks: 3.3 s, > 300 s under ASan), and ordered_json's operator[]
// searches the object's keys for each new key (100k metadata keys: 15.8 s). Keys are appended
// to the ordered map's vector instead: a duplicate is refused (problem) before the document is
// read. `depth` is what the callback parser reported for the same event (the containers open
// around it), so the limit and its message are unchanged.
struct ManifestBuilder {
  ojson* root = nullptr;
  std::vector<ojson*> stack;          // the open containers
  std::vector<std::set<std::string>> keys;  // of each open object, for duplicates (n log n for any keys)
  ojson* slot = nullptr;              // where the value after a key goes
  std::string problem;               // the first problem; parsing goes on to report syntax first

  void note_depth(size_t depth) {
    if (problem.empty() && depth > static_cast<size_t>(kMaxDepth))
      problem = fmt::format("nested deeper than {} levels", kMaxDepth);
  }
  ojson* place(ojson&& v) {
    if (stack.empty()) {
      *root = std::move(v);
      return root;
    }
    ojson& top = *stack.back();
    if (top.is_array()) {
      auto& a = top.get_ref<ojson::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    *slot = std::move(v);
    return slot;
  }
  bool value(ojson&& v) {
    note_depth(stack.size());
    place(std::move(v));
    return true;
  }
  bool null() { return value(ojson(nullptr)); }
  bool boolean(bool v) { return value(ojson(v)); }
  bool number_integer(ojson::number_integer_t v) { return value(ojson(v)); }
  bool number_unsigned(ojson::number_unsigned_t v) { return value(ojson(v)); }
  bool number_float(ojson::number_float_t v, const ojson::string_t&) { return value(ojson(v)); }
  bool string(ojson::string_t& v) { return value(ojson(std::move(v))); }
  bool binary(ojson::binary_t& v) { return value(ojson(ojson::binary_t(std::move(v)))); }
  bool start_object(size_t) {
    note_depth(stack.size());
    stack.push_back(place(ojson::object()));
    keys.emplace_back();
    return true;
  }
  bool key(ojson::string_t& k) {
    // As before: a duplicate found at the event that also passes the depth limit is the one named.
    const bool first = problem.empty();
    note_depth(stack.size());
    if (!keys.back().insert(k).second && first)
      problem = fmt::format("key '{}' appears twice in one object", k);
    auto& members = stack.back()->get_ref<ojson::object_t&>();
    members.emplace_back(std::move(k), nullptr);  // the vector's own append: no search
    slot = &members.back().second;
    return true;
  }
  bool end_object() {
    note_depth(stack.size() - 1);
    stack.pop_back();
    keys.pop_back();
    return true;
  }
  bool start_array(size_t) {
    note_depth(stack.size());
    stack.push_back(place(ojson::array()));
    return true;
  }
  bool end_array() {
    note_depth(stack.size() - 1);
    stack.pop_back();
    return true;
  }
  template <class Exception>
  bool parse_error(size_t, const std::string&, const Exception& ex) {
    throw ex;
  }
};

std::string shown_json(const ojson& v) {
  std::string s = v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

Result<uint64_t> get_uint(const ojson& obj, std::string_view key, std::string_view path, uint64_t max,
                          const Bad& bad, uint64_t min = 0) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(Errc::bad_value, path, "missing");
  if (!it->is_number_unsigned())
    return bad(Errc::bad_value, path, fmt::format("is {}, expected a non-negative integer", shown_json(*it)));
  uint64_t v = it->get<uint64_t>();
  if (v > max)
    return bad(Errc::limit_exceeded, path, fmt::format("is {}, allowed {} .. {}", v, min, max));
  if (v < min) return bad(Errc::bad_value, path, fmt::format("is {}, allowed {} .. {}", v, min, max));
  return v;
}

// A file named in the manifest stays inside the set's directory (spec §2.3).
std::string file_problem(std::string_view f) {
  if (f.empty()) return "is empty";
  if (f.find('\0') != std::string_view::npos) return "holds a NUL byte";
  if (f.front() == '/') return "is an absolute path; files are relative to the set directory";
  size_t start = 0;
  while (start <= f.size()) {
    size_t end = f.find('/', start);
    if (end == std::string_view::npos) end = f.size();
    if (f.substr(start, end - start) == "..") return "has a '..' component; files stay inside the set directory";
    start = end + 1;
  }
  return "";
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string dirname_of(const std::string& p) {
  size_t slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

}  // namespace

// ---- annotations (spec §4) --------------------------------------------------------------------

Result<AxisAnnotation> parse_axis_annotation(std::string_view axis) {
  AxisAnnotation out;
  size_t cut = axis.find_first_of("@+");
  out.base = std::string(axis.substr(0, cut));
  auto bad = [&](std::string_view what) {
    return make_error(Errc::bad_axes, fmt::format("axis '{}': {}", axis, what));
  };
  if (cut == std::string_view::npos) {
    if (out.base.empty()) return bad("empty axis name");
    return out;
  }
  if (out.base.empty()) return bad("no base name before the shard annotation");
  size_t i = cut;
  while (i < axis.size()) {
    const char kind = axis[i];
    size_t next = axis.find_first_of("@+", i + 1);
    std::string_view group = axis.substr(i + 1, next == std::string_view::npos ? std::string_view::npos : next - i - 1);
    if (!is_group_name(group, 1024))
      return bad(fmt::format("group '{}' after '{}' does not match [A-Za-z_][A-Za-z0-9_]*", group, kind));
    if (kind == '@') {
      if (!out.split.empty()) return bad("more than one split annotation ('@') on one axis");
      out.split = std::string(group);
    } else if (std::find(out.partial.begin(), out.partial.end(), group) == out.partial.end()) {
      out.partial.emplace_back(group);
    }
    i = next == std::string_view::npos ? axis.size() : next;
  }
  if (!out.split.empty() &&
      std::find(out.partial.begin(), out.partial.end(), out.split) != out.partial.end())
    return bad(fmt::format("group '{}' is both split ('@') and partial ('+')", out.split));
  return out;
}

std::string axis_base(std::string_view axis) {
  auto a = parse_axis_annotation(axis);
  return a ? a->base : std::string(axis);
}

Result<ShardSpec> parse_shard_spec(const std::vector<std::string>& axes) {
  ShardSpec s;
  std::set<std::string> partial;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = parse_axis_annotation(axes[i]);
    if (!a) return std::move(a).error();
    s.base_axes.push_back(a->base);
    if (!a->split.empty()) {
      for (const auto& [g, ax] : s.split)
        if (g == a->split)
          return make_error(Errc::bad_axes, fmt::format("axes '{}': group '{}' splits axes {} and {}; a "
                                                        "group splits at most one axis",
                                                        join_axes(axes), g, ax, i));
      s.split.emplace_back(a->split, static_cast<uint32_t>(i));
    }
    partial.insert(a->partial.begin(), a->partial.end());
  }
  for (const auto& [g, ax] : s.split)
    if (partial.count(g))
      return make_error(Errc::bad_axes, fmt::format("axes '{}': group '{}' is both split and partial",
                                                    join_axes(axes), g));
  s.partial.assign(partial.begin(), partial.end());
  return s;
}

// ---- the manifest (spec §2) -------------------------------------------------------------------

Result<DumpSet> DumpSet::parse_manifest(std::string_view text, const std::string& dir) {
  const Bad bad{dir + "/" + std::string(kDumpSetManifest)};
  if (text.size() > kMaxManifestBytes)
    return make_error(Errc::limit_exceeded, fmt::format("{}: {} bytes, allowed at most {}", bad.origin,
                                                        text.size(), kMaxManifestBytes));
  // Duplicate keys and nesting depth are checked while parsing: the parser itself is iterative,
  // and a key given twice must not silently pick one of two world sizes.
  ManifestBuilder builder;
  std::string& problem = builder.problem;
  ojson doc;
  builder.root = &doc;
  try {
    ojson::sax_parse(text.begin(), text.end(), &builder, ojson::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/false);
  } catch (const ojson::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." -> the
    // part after the position, which we give as line:column ourselves.
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    return make_error(Errc::bad_value, fmt::format("{}:{}: invalid JSON: {}", bad.origin,
                                                   line_col(text, e.byte ? e.byte - 1 : 0), detail));
  } catch (const std::exception& e) {
    return make_error(Errc::bad_value, fmt::format("{}: invalid JSON: {}", bad.origin, e.what()));
  }
  if (!problem.empty()) {
    Errc c = problem.rfind("nested", 0) == 0 ? Errc::limit_exceeded : Errc::duplicate_key;
    return make_error(c, fmt::format("{}: {}", bad.origin, problem));
  }
  if (!doc.is_object()) return bad(Errc::bad_value, "(top level)", "is not a JSON object");

  DumpSet s;
  s.directory = dir;
  auto fmt_it = doc.find("format");
  if (fmt_it == doc.end()) return bad(Errc::bad_value, "format", fmt::format("missing; expected \"{}\"", kDumpSetFormat));
  if (!fmt_it->is_string() || fmt_it->get<std::string>() != kDumpSetFormat)
    return bad(Errc::unsupported_version, "format",
               fmt::format("is {}, expected \"{}\"", shown_json(*fmt_it), kDumpSetFormat));

  auto ws = get_uint(doc, "world_size", "world_size", kMaxWorldSize, bad, /*min=*/1);
  if (!ws) return std::move(ws).error();
  s.world_size = static_cast<uint32_t>(*ws);

  auto g_it = doc.find("groups");
  if (g_it == doc.end()) return bad(Errc::bad_value, "groups", "missing (a world of 1 has {})");
  if (!g_it->is_object()) return bad(Errc::bad_value, "groups", fmt::format("is {}, expected an object", shown_json(*g_it)));
  uint64_t product = 1;
  if (g_it->size() > kMaxGroups)
    return bad(Errc::limit_exceeded, "groups", fmt::format("has {} groups, allowed at most {}", g_it->size(), kMaxGroups));
  for (auto it = g_it->begin(); it != g_it->end(); ++it) {
    const std::string key = "groups." + it.key();
    if (!is_group_name(it.key(), 32))
      return bad(Errc::bad_value, key, "group names match [A-Za-z_][A-Za-z0-9_]{0,31}");
    if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 || it->get<uint64_t>() > kMaxWorldSize)
      return bad(Errc::bad_value, key, fmt::format("is {}, allowed 1 .. {}", shown_json(*it), kMaxWorldSize));
    product *= it->get<uint64_t>();  // each factor <= 2^16, and we stop once past world_size
    if (product > s.world_size)
      return bad(Errc::bad_value, "groups", fmt::format("the product of the group sizes exceeds world_size {}", s.world_size));
    s.groups.emplace_back(it.key(), static_cast<uint32_t>(it->get<uint64_t>()));
  }
  if (product != s.world_size)
    return bad(Errc::bad_value, "groups", fmt::format("the product of the group sizes is {}, world_size is {}",
                                                      product, s.world_size));

  auto o_it = doc.find("order");
  if (o_it == doc.end()) return bad(Errc::bad_value, "order", "missing; expected \"lockstep\" or \"pipeline\"");
  if (*o_it == "lockstep") {
    s.order = SetOrder::lockstep;
  } else if (*o_it == "pipeline") {
    s.order = SetOrder::pipeline;
    if (!s.group_index("pp")) return bad(Errc::bad_value, "order", "is \"pipeline\" but groups has no \"pp\"");
  } else {
    return bad(Errc::bad_value, "order", fmt::format("is {}, expected \"lockstep\" or \"pipeline\"", shown_json(*o_it)));
  }

  auto r_it = doc.find("ranks");
  if (r_it == doc.end()) return bad(Errc::bad_value, "ranks", "missing");
  if (!r_it->is_array()) return bad(Errc::bad_value, "ranks", fmt::format("is {}, expected an array", shown_json(*r_it)));
  if (r_it->size() != s.world_size)
    return bad(Errc::bad_value, "ranks", fmt::format("has {} entries, world_size is {}", r_it->size(), s.world_size));
  s.ranks.resize(s.world_size);  // bounded by the entries already parsed
  std::vector<bool> seen(s.world_size, false);
  std::set<std::vector<uint32_t>> coords_seen;
  std::set<std::string> files_seen;
  for (size_t i = 0; i < r_it->size(); ++i) {
    const ojson& e = (*r_it)[i];
    const std::string at = fmt::format("ranks[{}]", i);
    if (!e.is_object()) return bad(Errc::bad_value, at, fmt::format("is {}, expected an object", shown_json(e)));
    auto rank = get_uint(e, "rank", at + ".rank", s.world_size - 1ull, bad);
    if (!rank) {
      if (rank.error().code == Errc::limit_exceeded)
        return bad(Errc::bad_value, at + ".rank", fmt::format("is {}, allowed 0 .. {}", shown_json(e["rank"]), s.world_size - 1));
      return std::move(rank).error();
    }
    if (seen[*rank]) return bad(Errc::bad_value, at + ".rank", fmt::format("rank {} appears twice", *rank));
    seen[*rank] = true;
    RankEntry& re = s.ranks[*rank];
    re.rank = static_cast<uint32_t>(*rank);
    auto f = e.find("file");
    if (f == e.end()) return bad(Errc::bad_value, at + ".file", "missing");
    if (!f->is_string()) return bad(Errc::bad_value, at + ".file", fmt::format("is {}, expected a string", shown_json(*f)));
    re.file = f->get<std::string>();
    if (std::string p = file_problem(re.file); !p.empty())
      return bad(Errc::bad_value, at + ".file", fmt::format("'{}' {}", re.file, p));
    if (!files_seen.insert(re.file).second)
      return bad(Errc::bad_value, at + ".file", fmt::format("'{}' is named by two ranks", re.file));
    re.path = dir + "/" + re.file;
    auto c = e.find("coords");
    if (c == e.end()) return bad(Errc::bad_value, at + ".coords", "missing");
    if (!c->is_object()) return bad(Errc::bad_value, at + ".coords", fmt::format("is {}, expected an object", shown_json(*c)));
    for (auto it = c->begin(); it != c->end(); ++it)
      if (!s.group_index(it.key()))
        return bad(Errc::bad_value, at + ".coords." + it.key(), "names no group of 'groups'");
    for (const auto& [g, size] : s.groups) {
      auto v = c->find(g);
      if (v == c->end()) return bad(Errc::bad_value, at + ".coords." + g, "missing");
      if (!v->is_number_unsigned() || v->get<uint64_t>() >= size)
        return bad(Errc::bad_value, at + ".coords." + g, fmt::format("is {}, allowed 0 .. {}", shown_json(*v), size - 1));
      re.coords.push_back(static_cast<uint32_t>(v->get<uint64_t>()));
    }
    if (!coords_seen.insert(re.coords).second)
      return bad(Errc::bad_value, at + ".coords", "the same coordinates as another rank");
  }

  if (auto m = doc.find("metadata"); m != doc.end()) {
    if (!m->is_object()) return bad(Errc::bad_value, "metadata", fmt::format("is {}, expected an object", shown_json(*m)));
    for (auto it = m->begin(); it != m->end(); ++it)
      s.metadata.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
  }
  return s;
}

std::optional<size_t> DumpSet::group_index(std::string_view name) const {
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].first == name) return i;
  return std::nullopt;
}

std::string DumpSet::coords_text(uint32_t rank) const {
  std::string s;
  for (size_t i = 0; i < groups.size(); ++i)
    s += fmt::format("{}{}={}", i ? "," : "", groups[i].first, ranks[rank].coords[i]);
  return s;
}

bool is_dump_set_path(const std::string& path) {
  if (is_directory(path)) return true;
  size_t slash = path.find_last_of('/');
  std::string_view base = slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
  return base == kDumpSetManifest;
}

Result<DumpSet> DumpSet::open_manifest(const std::string& path) {
  const std::string dir = is_directory(path) ? path : dirname_of(path);
  const std::string manifest = is_directory(path) ? dir + "/" + std::string(kDumpSetManifest) : path;
  struct stat st {};
  if (is_directory(path) && ::stat(manifest.c_str(), &st) != 0 && errno == ENOENT)
    return make_error(Errc::io_error, fmt::format("cannot read '{}': it is a directory without {}, "
                                                  "neither a dump nor a dump set", path, kDumpSetManifest));
  auto text = read_small_file(manifest, kMaxManifestBytes);
  if (!text) {
    Error e = std::move(text).error();
    e.message = manifest + ": " + e.message;
    return e;
  }
  auto parsed = parse_manifest(*text, dir);
  if (!parsed) return parsed;
  parsed->path = path;
  // The manifest's names are checked by spelling only (no '..', not absolute); a symbolic link
  // in the set's folder, to a rank file or to a folder above one, would still read a dump from
  // elsewhere and let `verify` vouch for it (issue 23 §6). Each file that exists must resolve
  // inside the set's folder as resolved; a missing one is left for the open to report.
  char* root = ::realpath(dir.c_str(), nullptr);
  if (!root) return make_error(Errc::io_error, fmt::format("cannot resolve '{}': {}", dir, std::strerror(errno)));
  const std::string inside = std::string(root) + (std::string_view(root) == "/" ? "" : "/");
  ::free(root);
  for (size_t i = 0; i < parsed->ranks.size(); ++i) {
    const RankEntry& e = parsed->ranks[i];
    char* real = ::realpath(e.path.c_str(), nullptr);
    if (!real) continue;
    const bool ok = std::string_view(real).starts_with(inside);
    ::free(real);
    if (!ok)
      return make_error(Errc::bad_value, fmt::format("{}: key 'ranks[{}].file': '{}' is a symbolic link (or under "
                                                     "one) that leaves the set directory; files stay inside it",
                                                     manifest, i, e.file));
  }
  return parsed;
}

Result<DumpSet> DumpSet::open(const std::string& path, const OpenOptions& options) {
  DumpSet s;
  if (!is_dump_set_path(path)) {
    auto r = Reader::open(path, options);
    if (!r) return std::move(r).error();
    s.single = true;
    s.directory = dirname_of(path);
    RankEntry e;
    e.file = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    e.path = path;
    s.ranks.push_back(std::move(e));
    s.readers.push_back(std::move(*r));
  } else {
    auto parsed = open_manifest(path);
    if (!parsed) return std::move(parsed).error();
    s = std::move(*parsed);
    s.readers.reserve(s.ranks.size());
    for (const RankEntry& e : s.ranks) {
      auto r = Reader::open(e.path, options);
      if (!r) {
        Error err = std::move(r).error();
        err.message = fmt::format("rank {} file '{}': {}", e.rank, e.path, err.message);
        return err;
      }
      s.readers.push_back(std::move(*r));
    }
  }
  s.path = path;
  return s;
}

std::vector<std::pair<uint32_t, const Record*>> DumpSet::records_in_global_order() const {
  struct Entry {
    uint32_t stage;
    uint64_t exec;
    uint32_t rank;
    size_t pos;
    const Record* rec;
  };
  std::vector<Entry> entries;
  const std::optional<size_t> pp = order == SetOrder::pipeline ? group_index("pp") : std::nullopt;
  for (uint32_t r = 0; r < readers.size(); ++r) {
    auto recs = readers[r].records();
    for (size_t k = 0; k < recs.size(); ++k)
      entries.push_back({pp ? ranks[r].coords[*pp] : 0u, single ? 0 : recs[k].info.exec_index, r, k, &recs[k]});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.stage, a.exec, a.rank, a.pos) < std::tie(b.stage, b.exec, b.rank, b.pos);
  });
  std::vector<std::pair<uint32_t, const Record*>> out;
  out.reserve(entries.size());
  for (const Entry& e : entries) out.emplace_back(e.rank, e.rec);
  return out;
}

Result<void> DumpSet::check_rank_metadata() const {
  if (single) return {};
  for (const RankEntry& e : ranks) {
    const FileHeader& h = readers[e.rank].header();
    const std::pair<std::string_view, std::string> want[] = {
        {"ds.rank", std::to_string(e.rank)},
        {"ds.world_size", std::to_string(world_size)},
        {"ds.coords", coords_text(e.rank)}};
    for (const auto& [key, value] : want) {
      bool present = false;
      for (const auto& [k, v] : h.metadata) present = present || k == key;
      std::string_view got = h.get(key);
      if (!present || got != value)
        return make_error(Errc::bad_value,
                          fmt::format("rank {} file '{}': metadata '{}' is {}, the manifest says '{}'",
                                      e.rank, e.path, key, present ? fmt::format("'{}'", got) : "absent",
                                      value));
    }
  }
  return {};
}

}  // namespace driftscope
