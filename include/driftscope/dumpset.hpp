// driftscope — dump sets: one .tdump per rank of a distributed run plus a manifest
// (docs/dumpsets.md), and the shard annotations that ride in axis names (`hidden@tp`, `out+tp`).
//
// Contract: DumpSet::open reads and validates the manifest (at most 16 MiB, nesting at most 64,
// world_size at most kMaxWorldSize) and opens every rank's dump; any violation is one Error with a
// stable code naming the key (and, for JSON syntax, line:column). Nothing is allocated in
// proportion to a number the manifest states before the entries backing it have been read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/reader.hpp"

namespace driftscope {

inline constexpr std::string_view kDumpSetManifest = "driftscope-set.json";
inline constexpr std::string_view kDumpSetFormat = "driftscope.set/1";
// Every rank of a set is mapped while the set is open, and a comparison opens two sets: 4,096
// ranks keep that within the readers' 16,384 mapping slots, Linux's default vm.max_map_count
// (65,530) and a descriptor limit the command raises (docs/dumpsets.md §9: was 65,536, which no
// reader could open).
inline constexpr uint32_t kMaxWorldSize = 4096;
inline constexpr uint64_t kMaxManifestBytes = 16u << 20;

// ---- shard annotations (docs/dumpsets.md §4) -----------------------------------------------------

// One axis name split into its base and annotations: "hidden@tp" -> base "hidden", split "tp";
// "out+tp+dp" -> base "out", partial {"tp", "dp"}.
struct AxisAnnotation {
  std::string base;
  std::string split;                 // group the axis is split across; empty: none
  std::vector<std::string> partial;  // groups the whole tensor is a partial sum over
};
// The one parser of axis-name annotations (pairing, layout and axis checks use `base`). Errors
// (bad_axes): empty base, a group name that does not match [A-Za-z_][A-Za-z0-9_]*, two splits on
// one axis, a group both split and partial on one axis.
DS_API Result<AxisAnnotation> parse_axis_annotation(std::string_view axis);
// The base name of an axis ("hidden@tp" -> "hidden"); the axis itself when it does not parse.
DS_API std::string axis_base(std::string_view axis);

// How a record is sharded: group -> split axis, and the partial-sum groups; empty: replicated.
struct ShardSpec {
  std::vector<std::pair<std::string, uint32_t>> split;  // (group, axis index), in axis order
  std::vector<std::string> partial;                     // sorted, unique
  std::vector<std::string> base_axes;                   // axes without annotations
  bool sharded() const noexcept { return !split.empty() || !partial.empty(); }
};
// Parses every axis of a record. Errors (bad_axes) as above, plus a group splitting two axes and a
// group that is both split and partial in one record.
DS_API Result<ShardSpec> parse_shard_spec(const std::vector<std::string>& axes);

// ---- the set ---------------------------------------------------------------------------------

enum class SetOrder : uint8_t { lockstep, pipeline };

struct RankEntry {
  uint32_t rank = 0;
  std::string file;             // as in the manifest (relative)
  std::string path;             // directory + "/" + file
  std::vector<uint32_t> coords; // one per group, in DumpSet::groups order
};

class DS_API DumpSet {
 public:
  // `path` is the set's directory or its manifest. A path that is a regular .tdump file opens as
  // a set of world size 1 (no groups). Every rank's dump is opened with `options`.
  static Result<DumpSet> open(const std::string& path, const OpenOptions& options = {});
  // Reads and validates the manifest of the set at `path` (directory or manifest); opens no dump.
  static Result<DumpSet> open_manifest(const std::string& path);
  // Validates manifest text (no dump is opened); `dir` resolves the files.
  static Result<DumpSet> parse_manifest(std::string_view text, const std::string& dir);

  std::string path;           // what open() was given
  std::string directory;
  bool single = false;        // a plain .tdump opened as a set of one
  uint32_t world_size = 1;
  std::vector<std::pair<std::string, uint32_t>> groups;  // in manifest order
  SetOrder order = SetOrder::lockstep;
  std::vector<RankEntry> ranks;       // index = rank
  KeyValues metadata;                 // the manifest's "metadata" (string values only)
  std::vector<Reader> readers;        // index = rank (after open())

  // Index of a group in `groups`; nullopt when absent.
  std::optional<size_t> group_index(std::string_view name) const;
  // "tp=1,pp=0" in group order (the ds.coords metadata value).
  std::string coords_text(uint32_t rank) const;
  // The ds.rank / ds.world_size / ds.coords metadata of every reader agree with the manifest;
  // errors (bad_value) name the rank, the file, the key, the value found and the one expected.
  Result<void> check_rank_metadata() const;
  // Every record of every rank in the global order (docs/dumpsets.md §6): lockstep by
  // (exec_index, rank), pipeline by (pp coordinate, exec_index, rank); file order breaks ties.
  // A single dump keeps its file order. Pairs (rank, record); records live as long as the set.
  std::vector<std::pair<uint32_t, const Record*>> records_in_global_order() const;
};

// True when `path` names a directory or a file named driftscope-set.json (what every front end
// treats as a set rather than a single dump).
DS_API bool is_dump_set_path(const std::string& path);

}  // namespace driftscope
