// Reading a dump's records one at a time (issue 13 §5): Reader::records() builds every Record of
// the file (about 350 bytes each with their strings); the comparison engine instead decodes the
// records it is working on from the reader's compact table and lets them go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "driftscope/reader.hpp"

namespace driftscope::detail {

struct ReaderAccess {
  // Record::summary(): the decoded SUMMARY payload.
  static void set_summary(Record& r, Summary&& s) { r.summary_ = std::move(s); }
  // records()[i], decoded from the file (i < record_count(); the scan on open checked it).
  static Record record(const Reader& reader, size_t i);
  // Whether some record carries `axes_ops`, `norm_axes` or `softmax_axis` (docs/format.md §3.3),
  // as the scan on open saw it: false means no record has facts for the checks by axis name.
  static bool has_axes_attributes(const Reader& reader);
  // records()[i].info.exec_index, from the table.
  static uint64_t exec_index(const Reader& reader, size_t i);
  // records()[i]'s identity from the table: fnv1a64 of the name (common/bytes.hpp), occurrence,
  // role index and role, without decoding the meta.
  struct Identity {
    uint64_t name_hash = 0;
    uint32_t occurrence = 0;
    uint16_t role_index = 0;
    Role role = Role::output;
  };
  static Identity identity(const Reader& reader, size_t i);
  // records()[i].offset when record i's frame still describes `payload` (its payload field, as
  // the scan found it), without decoding the meta; nullopt when the file changed since (a file
  // cut meanwhile reads zeros there).
  static std::optional<uint64_t> frame_offset(const Reader& reader, size_t i,
                                              std::span<const std::byte> payload);
  // The index of what Reader::find() returns, without building records().
  static std::optional<size_t> find(const Reader& reader, std::string_view name, uint32_t occurrence,
                                    Role role, uint16_t role_index);
};

}  // namespace driftscope::detail
