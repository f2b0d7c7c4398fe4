// The file rules of import and export: inputs must be regular files (checked without blocking,
// so a FIFO is refused instead of hanging), must not change while read, and must not be the
// output; outputs are written to a temporary file that is renamed into place only on success.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "common/file.hpp"
#include "driftscope/error.hpp"

namespace driftscope::interop {

// A mapped input plus what it looked like when opened.
class Input {
 public:
  // io_error when it cannot be opened, is not a regular file (FIFO, device, directory: refused
  // before anything could block on it) or cannot be mapped.
  static Result<Input> open(const std::string& path);
  std::span<const std::byte> bytes() const { return map_.bytes(); }
  // io_error "file changed while reading" when the file is now shorter, another inode, or
  // rewritten in place (same size, new mtime). Growth is not a change.
  Result<void> check_unchanged() const;

 private:
  std::string path_;
  detail::MappedFile map_;
  uint64_t size_ = 0, ino_ = 0, dev_ = 0;
  int64_t mtime_ns_ = 0;
};

// Refuses OUT when it names the same file as IN (also through symlinks and hard links).
Result<void> refuse_same_file(const std::string& in, const std::string& out);

// RAII temporary output: created next to the target (so the rename stays on one file system),
// removed by the destructor on every path that does not commit().
class TempOutput {
 public:
  static Result<TempOutput> create(const std::string& target);
  TempOutput(TempOutput&& o) noexcept;
  TempOutput& operator=(TempOutput&&) = delete;
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  ~TempOutput();
  const std::string& temp_path() const { return temp_; }
  Result<void> commit();

 private:
  TempOutput() = default;
  std::string target_;
  std::string temp_;
  bool live_ = false;
};

}  // namespace driftscope::interop
