// driftscope — streaming TDUMP writer (docs/format.md §5).
//
// Thread-safe: any thread may call write(); records land in the order the calls are serialised.
// The writer holds at most one record's header in memory; payloads stream from the caller's
// buffer (synchronous mode) or from a bounded queue (background mode). It uses write()/pwrite(),
// never a memory map, so a crash of the process loses at most the record being written; in
// background mode also the records still queued (at most queue_bytes, held in process memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

enum class SyncPolicy : uint8_t {
  on_close,      // fdatasync once, at close (fastest; a crash may lose what the OS had buffered)
  every_record,  // fdatasync after each record: write() returning means the record is durable
  every_bytes,   // fdatasync whenever sync_bytes more bytes were written since the last sync
};

struct WriterOptions {
  KeyValues metadata;                 // run metadata (framework, backend, device, ...); "writer" is added
  std::string filter;                 // filter syntax (docs/filters.md); empty records everything
  SyncPolicy sync = SyncPolicy::on_close;
  uint64_t sync_bytes = 64ull << 20;  // for every_bytes
  bool append = false;                // reopen an existing file and continue it (§5 Append)
  bool overwrite = true;              // when !append: replace an existing file
  // Background mode: write() copies the payload into a bounded queue and returns; a writer
  // thread does the I/O. write() blocks only while more than queue_bytes are pending. The queue
  // is one staging buffer of queue_bytes, reserved at the first record and reused (pages are
  // touched as needed and stay until close). A payload larger than it is written from the
  // caller's buffer once the queue has drained, so staging never exceeds queue_bytes.
  bool background = false;
  uint64_t queue_bytes = 256ull << 20;
  // Drop-behind: the writer starts writing the file back every 4 MiB and evicts what reached the
  // device from the page cache, keeping about the last 20 MiB of the file cached. A long recording
  // then neither evicts other files (model weights, a reference dump) nor makes the kernel find
  // fresh pages for every byte; the price is that reading the dump right after comes from the
  // device. Bytes and durability are unchanged. Files under 16 MiB stay fully cached.
  bool drop_behind = false;
  // Deterministic output for golden files and tests: fixed salt instead of a random one.
  bool fixed_salt = false;
  uint64_t salt = 0;
};

// What happened to an offered tensor.
enum class WriteStatus : uint8_t { written, filtered, over_budget };

struct WriteResult {
  WriteStatus status = WriteStatus::written;
  uint64_t exec_index = 0;   // index assigned (also for filtered tensors: they consumed it)
  uint32_t occurrence = 0;
  uint64_t offset = 0;       // record offset in the file (written only)
};

class DS_API Writer {
 public:
  static Result<std::unique_ptr<Writer>> create(const std::string& path,
                                                const WriterOptions& options = {});
  ~Writer();  // closes if still open (errors are then lost: call close() to see them)
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Records a tensor. `payload` holds numel * dtype_size bytes, row-major, little-endian.
  // Validates `info` against the format's limits exactly as a reader would.
  Result<WriteResult> write(const TensorInfo& info, std::span<const std::byte> payload);
  // Light mode: records a summary (stats + projection) instead of the values.
  Result<WriteResult> write_summary(const TensorInfo& info, const Summary& summary);
  // Cheap pre-check for producers: would a tensor of this name pass the filter's name clauses?
  bool wants(std::string_view name) const;

  // Waits for queued records and fdatasyncs.
  Result<void> flush();
  // Writes INDEX and END, syncs and closes. Idempotent.
  Result<void> close();

  uint64_t records_written() const;
  uint64_t bytes_written() const;   // file size so far
  uint64_t salt() const;

 private:
  Writer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace driftscope
