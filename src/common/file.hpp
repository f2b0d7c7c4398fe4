// Files: a read-only memory map for readers, and a plain descriptor with full-write, pwrite,
// fdatasync and truncate for writers (writers never write through a map: docs/format.md §5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "driftscope/error.hpp"

namespace driftscope::detail {

class MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

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
