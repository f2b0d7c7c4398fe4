// Internals shared by the dump-set files of the comparison engine (docs/dumpsets.md; not
// installed): set_compare.cpp (logical tensors, pairing, the report), shard_check.cpp (§7.1,
// naming the failing shards) and set_dataflow.cpp (ds.inputs across ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "compare/internal.hpp"
#include "driftscope/dumpset.hpp"
#include "driftscope/writer.hpp"

namespace driftscope::compare_detail {

using Coords = std::vector<std::pair<std::string, uint32_t>>;  // (group, coordinate), group order

// One rank's record of a logical tensor.
struct Shard {
  uint32_t rank = 0;
  const Record* rec = nullptr;
  std::vector<uint32_t> block;    // coordinate in each split group (Logical::split order)
  std::vector<uint32_t> partial;  // coordinate in each partial group
};

// A tensor of one side as the run computed it (§5): its shards on the ranks that hold it.
struct Logical {
  const Record* first = nullptr;  // the first shard in global order: name, op, attributes
  std::string pair_name;          // after the side's renames
  Coords key;                     // coordinates of the groups it is not sharded over
  std::vector<std::pair<uint32_t, std::pair<std::string, uint32_t>>> split;  // axis, (group, size)
  std::vector<std::pair<std::string, uint32_t>> partial;                     // (group, size)
  std::vector<std::string> base_axes;
  std::vector<Shard> shards;
  std::vector<uint32_t> ranks;    // sorted
  std::string problem;            // why it cannot be assembled (reported as a warning)
  // Data flow (set_dataflow.cpp): every shard carries a valid ds.inputs, and the logical tensors
  // of this side those inputs belong to (indexes into Side::logicals, sorted).
  bool has_inputs = false;
  std::vector<size_t> inputs;
};

struct Side {
  DumpSet set;
  std::vector<Logical> logicals;  // global order (docs/dumpsets.md §6)
  bool dataflow = false;          // its logical dumps carry ds.inputs (link_dataflow)
};

// One record of a side's logical dump, planned before anything is written.
struct PlannedRecord {
  size_t logical = 0;       // index into Side::logicals
  uint32_t occurrence = 0;  // in the logical dump
  uint64_t seq = 0;         // its exec_index there
  Coords pin;               // the coordinates it stands for: its own key, then its partner's
};

// "0,1,3"
std::string ranks_text(const std::vector<uint32_t>& ranks);

// Where each shard of a split tensor lands (§5.1): per split group, the offset of each block
// coordinate along the split axis, and the gathered shape. An error when the shards cannot be put
// together (raw TENSOR records, one dtype unless summed, every axis but the split one equal).
struct Placement {
  std::vector<std::vector<uint64_t>> offset;  // [split group][block coordinate]
  std::vector<uint64_t> shape;                // of the whole tensor
};
Result<Placement> place_shards(const Logical& l);
// The offset of shard `s` along every axis of the whole tensor (0 on axes that are not split).
std::vector<uint64_t> shard_shift(const Logical& l, const Shard& s, const Placement& at);

// The row walk shared by the gather (§5.1) and its inverse, the slice (§7.1): for each row (every
// axis but the last) of a block of shape `shape` placed at `shift` inside a tensor of shape
// `whole`, fn(block_start, whole_start, row_length) with flat element indexes, in row-major order.
template <typename Fn>
void for_each_row(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& whole,
                  const std::vector<uint64_t>& shift, Fn&& fn) {
  const size_t rank = shape.size();
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  const uint64_t row = rank ? shape[rank - 1] : 1;
  std::vector<uint64_t> coord(rank, 0);
  for (uint64_t start = 0; start < n; start += row) {
    uint64_t at = 0;
    for (size_t ax = 0; ax < rank; ++ax) at = at * whole[ax] + coord[ax] + shift[ax];
    fn(start, at, row);
    for (size_t ax = rank >= 1 ? rank - 1 : 0; ax-- > 0;) {
      if (++coord[ax] < shape[ax]) break;
      coord[ax] = 0;
    }
  }
}

// A temporary dump being written; removed unless released (an error leaves nothing behind).
struct TempDump {
  std::string path;
  std::unique_ptr<Writer> writer;
  TempDump() = default;
  TempDump(TempDump&& o) noexcept;
  TempDump& operator=(TempDump&&) = delete;
  ~TempDump();
  // `DIR/driftscope-set-SIDE-XXXXXX`, written with `metadata` as its run metadata.
  static Result<TempDump> create(const std::string& dir, std::string_view side, const KeyValues& metadata);
  // Closes the writer; the file is the caller's from here on.
  Result<std::string> release();
};

// The run metadata of a side's logical dump: the first rank's, less ds.* and writer.
KeyValues run_metadata(const DumpSet& s);

// ---- set_dataflow.cpp: data flow across ranks (docs/dumpsets.md §7.2) ---------------------------
// When every rank of the side recorded ds.inputs (and the set is not a pipeline of several
// stages), sets Side::dataflow and links every logical tensor that is in the logical dump
// (Logical::problem empty) to the logical tensors its shards' inputs belong to, following
// records that are not in the logical dump (filtered out, not assemblable) through to what they
// were computed from. Returns a warning when the side's data flow is not used although some ranks
// recorded it ("" otherwise). `which`: "reference" or "candidate".
std::string link_dataflow(Side& side, std::string_view which);
// The ds.inputs value of each planned record of `side`'s logical dump: for each input logical
// tensor, its records whose pins agree with this record's on every group both name (all of its
// records when none does). nullopt: no data flow for that record; `too_long` counts the values
// over the attribute limit (left out).
std::vector<std::optional<std::string>> logical_inputs(const Side& side, const std::vector<PlannedRecord>& plan,
                                                       size_t& too_long);

// ---- shard_check.cpp: naming the failing shards (docs/dumpsets.md §7.1) -------------------------
// For every failing pair gathered from split shards on the side whose ranks the report names
// (`by_cand`), against one whole tensor on the other side: each shard against the slice of the
// whole tensor at its offset, judged by the same engine and options, so that the pair names only
// the ranks whose own shard fails (PairResult::failing_shards, shard_check). `logicals[i]` are
// pair i's (reference, candidate) logical tensors, {nullptr, nullptr} when it has none. A problem
// here (temporary files in `directory`) is a warning, and the pairs keep every rank.
void name_failing_shards(Report& report, const Side& ref, const Side& cand, bool by_cand,
                         const std::vector<std::pair<const Logical*, const Logical*>>& logicals,
                         const CompareOptions& options, const std::string& directory);

}  // namespace driftscope::compare_detail
