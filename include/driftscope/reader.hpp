// driftscope — TDUMP reader: maps the file, validates every record before use, recovers what a
// crash left behind and reports damage in a result, never by aborting (docs/format.md §4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/detail/boxed.hpp"
#include "driftscope/error.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

enum class RecordKind : uint16_t { tensor = 1, summary = 2, index = 3, end = 4 };

struct DS_API FileHeader {
  uint16_t version_major = 1;
  uint16_t version_minor = 0;
  uint64_t salt = 0;
  uint32_t required_features = 0;
  uint32_t optional_features = 0;
  uint32_t header_length = 0;
  KeyValues metadata;
  std::string_view get(std::string_view key) const;  // "" when absent
};

namespace detail {
struct ReaderAccess;  // the library's record-at-a-time access (src/format/record_table.hpp)
}

// One TENSOR or SUMMARY record. Views point into the reader's mapping and live as long as it.
struct Record {
  RecordKind kind = RecordKind::tensor;
  TensorInfo info;                       // exec_index and occurrence as stored
  uint64_t offset = 0;                   // of the record frame in the file
  uint64_t size = 0;                     // record_length
  uint64_t payload_offset = 0;           // file offset of the payload (64-byte aligned)
  std::span<const std::byte> payload;    // TENSOR: the element bytes; SUMMARY: the raw summary
  // SUMMARY records only: the decoded summary, lives as long as the Record; null otherwise.
  const Summary* summary() const noexcept { return summary_.operator->(); }

 private:
  friend struct detail::ReaderAccess;  // the reader sets it
  // (Boxed, detail/boxed.hpp: one pointer; most records are TENSOR records.)
  detail::Boxed<Summary> summary_;
};

enum class FileState : uint8_t {
  clean,       // ends with INDEX + END
  unfinished,  // no END record: the run crashed or is still running (not an error)
  cut,         // torn tail: the last record is incomplete and was dropped (not an error)
  corrupt,     // a record failed a check and more data followed it
};
DS_API std::string_view file_state_name(FileState s) noexcept;

struct Integrity {
  FileState state = FileState::clean;
  uint64_t file_size = 0;
  uint64_t valid_end = 0;          // offset just past the last valid record
  uint64_t data_end = 0;           // offset just past the last valid record that is not INDEX/END
  uint64_t cut_offset = kNoOffset; // where the torn tail starts (cut) — equals valid_end
  uint64_t discarded_bytes = 0;    // bytes from cut_offset to the end of the file
  std::optional<Error> corruption; // first failure (corrupt only): code, message, offset
  std::string corrupt_name;        // tensor name of the failing record when its meta was readable
  std::vector<Error> warnings;     // e.g. duplicate_tensor
  bool index_used = false;         // the footer index vouches for the scan (clean file, index
                                   // checked entry by entry and slot by slot, §3.4); find() answers
                                   // from a keyed in-memory table either way (issue 23 item 4)
  bool checksums_verified = false; // payload CRCs were checked for every record
};

enum class Verify : uint8_t {
  full,    // check every CRC, padding and field before returning (default)
  frames,  // check frames and metas; TENSOR/SUMMARY payload CRCs later, on verify_payload()
};

struct OpenOptions {
  Verify verify = Verify::full;
  bool use_index = true;  // on a clean file, report the (checked) footer index as used
                          // (Integrity::index_used); the verdict and lookups are the same either way
  bool resync = false;    // after corruption, search for the next valid record and go on
};

// Threads: every const member may be called from any number of threads at once on one Reader
// (header, integrity, records, record_count, bytes, find, find_all, verify_payload,
// check_unchanged). The lazily built tables behind records() and find() are built once under
// std::call_once: the first callers wait for that build, later calls only read. The Record
// pointers, spans and string views handed out stay valid, and the same, until the Reader is
// destroyed (moving a Reader keeps them: its state lives behind a pointer). Not safe: moving,
// assigning or destroying a Reader while another thread uses it, and the caller's bytes of
// from_memory() changing while it lives (those are the caller's to keep). A file shrinking under
// a mapped Reader is not a race: reads past the new end see zeros and check_unchanged() reports it.
class DS_API Reader {
 public:
  // Fails only when the file cannot be opened, mapped, or its header is invalid. Damage to
  // records is reported in integrity(), with every record before it returned.
  static Result<Reader> open(const std::string& path, const OpenOptions& options = {});
  // The same over bytes the caller keeps alive (fuzzing, tests).
  static Result<Reader> from_memory(std::span<const std::byte> bytes, const OpenOptions& options = {});

  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  const FileHeader& header() const;
  const Integrity& integrity() const;
  // TENSOR and SUMMARY records, in file order. Built from the file on the first call (or the
  // first find()): until then a reader holds a few dozen bytes per record, and the comparison
  // engine reads records one at a time without building them all (issue 13 §5).
  std::span<const Record> records() const;
  size_t record_count() const;              // records().size(), without building them
  std::span<const std::byte> bytes() const; // the whole mapped file

  // Lookup by identity. Uses the footer index when the file has one.
  const Record* find(std::string_view name, uint32_t occurrence = 0, Role role = Role::output,
                     uint16_t role_index = 0) const;
  // All records with this name (any role/occurrence), in file order.
  std::vector<const Record*> find_all(std::string_view name) const;

  // Checks the record CRC of one record (needed after Verify::frames).
  Result<void> verify_payload(const Record& r) const;

  // io_error "file changed while reading" when the mapped file shrank since open (a writer
  // truncated it: what was read past its new end was zeros, see driftscope/file.hpp). Call it
  // before reporting anything computed from payloads. Always ok for from_memory.
  Result<void> check_unchanged() const;

 private:
  friend struct detail::ReaderAccess;
  Reader();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace driftscope
