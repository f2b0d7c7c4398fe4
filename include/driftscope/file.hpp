// driftscope — the rules every reader and writer of files follows (library, CLI, Python, C ABI).
//
// Inputs
//   * Only regular files are read. A FIFO, device, socket or directory is refused before anything
//     can block on it (the open is non-blocking, then fstat must say S_ISREG).
//   * A mapped input may shrink while it is read (a writer truncating a live dump). The access
//     past the new end reads zeros instead of killing the process with SIGBUS, and
//     MappedFile::check_unchanged() then reports io_error "file changed while reading". Growth
//     (a writer appending) is not a change: the bytes already mapped stay valid.
// Outputs
//   * An output never names one of the inputs (same inode: the same path, a symlink or a hard
//     link): refused with invalid_argument before anything is written.
//   * An output is written to a temporary file in the target's directory and renamed into place,
//     so it is complete or absent, and a reader mapping the old file keeps it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "driftscope/api.h"
#include "driftscope/error.hpp"

namespace driftscope {

// Opens `path` read-only (O_CLOEXEC, blocking) when it is a regular file. Anything else fails
// with io_error "'<path>' is not a regular file (<kind>)" without blocking, whatever the kind.
DS_API Result<int> open_regular_file(const std::string& path);

// The whole content of a small regular file (policy and mapping files); limit_exceeded when it
// holds more than max_bytes.
DS_API Result<std::string> read_small_file(const std::string& path, size_t max_bytes);

// A read-only map of a whole regular file. Accesses past the end of a file that shrank after the
// map was made read zeros (a process-wide SIGBUS handler, installed once and chained to any
// previous one, replaces the missing pages; this works on every thread).
class DS_API MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // io_error "<path>: file changed while reading (...)" when a read hit a page the file no
  // longer has, or the file is now shorter than the map. Call it before reporting anything
  // computed from bytes(): until then results may have been computed from zeros.
  Result<void> check_unchanged() const;

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;       // kept open to re-check the size of this inode, whatever the path names now
  int slot_ = -1;     // registration of the map with the SIGBUS handler
  std::string path_;
};

// invalid_argument "output <out> is the input file ..." when `out` exists and is the same file
// (st_dev and st_ino, so also through symlinks and hard links) as one of `inputs`.
DS_API Result<void> refuse_input_as_output(const std::string& out, std::span<const std::string> inputs);

// A file written under a temporary name in the target's directory and renamed onto the target by
// commit(); the destructor removes the temporary file unless committed (so a failed or
// interrupted conversion leaves neither a half-written target nor litter).
class DS_API AtomicOutput {
 public:
  // Checks the target (refuse_input_as_output; an existing target must be a regular file) and
  // creates the empty temporary file.
  static Result<AtomicOutput> create(const std::string& target,
                                     std::span<const std::string> inputs = {});
  AtomicOutput(AtomicOutput&& o) noexcept;
  AtomicOutput& operator=(AtomicOutput&& o) noexcept;
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  ~AtomicOutput();

  const std::string& temp_path() const { return temp_; }
  const std::string& target() const { return target_; }
  Result<void> write(std::string_view data);  // appends to the temporary file
  Result<void> commit();                      // fsync, then rename onto the target

 private:
  AtomicOutput() = default;
  void discard() noexcept;
  std::string target_, temp_;
  int fd_ = -1;
  bool committed_ = true;
  uint64_t written_ = 0;  // bytes written so far
  uint64_t queued_ = 0;   // of which handed to the disk early (write-behind, write())
  // Past the first 16 MiB, write() fills aligned blocks that a thread writes around the page
  // cache (O_DIRECT) while the next one fills: a 2.75 GB report spent most of its time copying
  // into the page cache and writing it back (issue 30 item 4). Null until then, and for good
  // where the file system refuses O_DIRECT (direct_refused_).
  struct Direct;
  std::unique_ptr<Direct> direct_;
  bool direct_refused_ = false;
  Result<void> write_direct(std::string_view data);
  Result<void> finish_direct();
};

// An output written piece by piece by the rules above (reports of any size, never held whole).
// "-" is stdout. An existing FIFO or character device (/dev/stdout, /dev/null, a pipe) is written
// in place, as the stream it is; opening a FIFO nobody reads fails instead of blocking. Anything
// else goes through an AtomicOutput: nothing appears at `path` until commit().
class DS_API OutputFile {
 public:
  static Result<OutputFile> open(const std::string& path, std::span<const std::string> inputs = {});
  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  Result<void> write(std::string_view data);
  Result<void> commit();

 private:
  OutputFile() = default;
  std::string path_;
  int fd_ = -1;                 // stdout or a stream
  bool own_fd_ = false;
  std::unique_ptr<AtomicOutput> atomic_;
};

// OutputFile::open, write, commit.
DS_API Result<void> write_output_file(const std::string& path, std::string_view data,
                               std::span<const std::string> inputs = {});

}  // namespace driftscope
