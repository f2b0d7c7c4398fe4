// Files: the public reading and output rules (driftscope/file.hpp: regular files only, maps that
// survive a shrinking file, atomic outputs that never replace an input), plus a plain descriptor
// with full-write, pwrite, fdatasync and truncate for the dump writer (writers never write through
// a map: docs/format.md §5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "driftscope/error.hpp"
#include "driftscope/file.hpp"

namespace driftscope::detail {

using driftscope::MappedFile;

class OutFile {
 public:
  OutFile() = default;
  // flags: create/truncate (overwrite) or open existing read-write (append).
  static Result<OutFile> create(const std::string& path, bool overwrite);
  static Result<OutFile> open_existing(const std::string& path);
  OutFile(OutFile&& o) noexcept;
  OutFile& operator=(OutFile&& o) noexcept;
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile();

  Result<void> pwrite_all(const void* data, size_t size, uint64_t offset);
  // Gathers up to three buffers in one system call (record head, payload, padding).
  struct Piece {
    const void* data;
    size_t size;
  };
  Result<void> pwritev_all(std::span<const Piece> pieces, uint64_t offset);
  Result<void> sync();
  // Page-cache hints for a streaming writer (Linux; no-ops elsewhere and on file systems that
  // ignore them). start_writeback queues [offset, offset + size) for writing to the device without
  // waiting; evict waits for that range's writeback and drops its pages from the page cache.
  // Advisory only: the bytes and their durability (sync) are unaffected, so failures are ignored.
  void start_writeback(uint64_t offset, uint64_t size) noexcept;
  void evict(uint64_t offset, uint64_t size) noexcept;
  Result<void> truncate(uint64_t size);
  Result<uint64_t> size() const;
  Result<void> close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// errno text for messages.
std::string errno_text(int err);

}  // namespace driftscope::detail
