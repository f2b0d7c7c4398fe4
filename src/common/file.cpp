#include "common/file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace driftscope::detail {

std::string errno_text(int err) { return std::strerror(err); }

namespace {
Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(Errc::io_error, fmt::format("{} '{}': {}", what, path, errno_text(err)));
}
}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io_error, fmt::format("'{}' is not a regular file", path));
  }
  MappedFile m;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    // MAP_PRIVATE + PROT_READ: the reader can never modify its input.
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return io_error("cannot map", path, err);
    }
    m.data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

Result<OutFile> OutFile::create(const std::string& path, bool overwrite) {
  // Replace by unlink + create rather than O_TRUNC: a reader that still maps the old file keeps
  // its (now anonymous) inode instead of crashing with SIGBUS.
  if (overwrite && ::unlink(path.c_str()) != 0 && errno != ENOENT)
    return io_error("cannot replace", path, errno);
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return io_error("cannot create", path, errno);
  OutFile f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

Result<OutFile> OutFile::open_existing(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open for append", path, errno);
  OutFile f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

OutFile::OutFile(OutFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

OutFile& OutFile::operator=(OutFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> OutFile::pwrite_all(const void* data, size_t size, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path_, errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return {};
}

Result<void> OutFile::pwritev_all(std::span<const Piece> pieces, uint64_t offset) {
  constexpr size_t kMax = 8;
  if (pieces.size() > kMax) return make_error(Errc::invalid_argument, "pwritev_all: too many pieces");
  iovec iov[kMax];
  int n = 0;
  for (const Piece& p : pieces)
    if (p.size) iov[n++] = {const_cast<void*>(p.data), p.size};
  int first = 0;
  while (first < n) {
    ssize_t w = ::pwritev(fd_, iov + first, n - first, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path_, errno);
    }
    offset += static_cast<uint64_t>(w);
    // Advance past what was written (short writes are legal).
    size_t done = static_cast<size_t>(w);
    while (first < n && done >= iov[first].iov_len) done -= iov[first++].iov_len;
    if (first < n) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + done;
      iov[first].iov_len -= done;
    }
  }
  return {};
}

Result<void> OutFile::sync() {
  if (::fdatasync(fd_) != 0) return io_error("cannot sync", path_, errno);
  return {};
}

Result<void> OutFile::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return io_error("cannot truncate", path_, errno);
  return {};
}

Result<uint64_t> OutFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return io_error("cannot stat", path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

Result<void> OutFile::close() {
  if (fd_ < 0) return {};
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return io_error("cannot close", path_, errno);
  return {};
}

}  // namespace driftscope::detail
