// Reading a dump's records one at a time (issue 13 §5): Reader::records() builds every Record of
// the file (about 350 bytes each with their strings); the comparison engine instead decodes the
// records it is working on from the reader's compact table and lets them go.
#pragma once

#include <cstddef>
#include <cstdint>

#include "driftscope/reader.hpp"

namespace driftscope::detail {

struct ReaderAccess {
  // records()[i], decoded from the file (i < record_count(); the scan on open checked it).
  static Record record(const Reader& reader, size_t i);
  // records()[i].info.exec_index, from the table.
  static uint64_t exec_index(const Reader& reader, size_t i);
};

}  // namespace driftscope::detail
