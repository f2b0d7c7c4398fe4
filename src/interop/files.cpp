#include "interop/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace driftscope::interop {

namespace {
int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}
}  // namespace

Result<Input> Input::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return make_error(Errc::io_error, fmt::format("{}: cannot open: {}", path, detail::errno_text(errno)));
  struct stat st {};
  int rc = ::fstat(fd, &st);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return make_error(Errc::io_error, fmt::format("{}: cannot stat: {}", path, detail::errno_text(err)));
  if (!S_ISREG(st.st_mode)) {
    // Worded as src/common/file.cpp will word it (the io work of issue 7 unifies the two).
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return make_error(Errc::io_error, fmt::format("{}: cannot read '{}': it is {}, not a regular file",
                                                  path, path, kind));
  }
  Input in;
  in.path_ = path;
  in.size_ = static_cast<uint64_t>(st.st_size);
  in.ino_ = static_cast<uint64_t>(st.st_ino);
  in.dev_ = static_cast<uint64_t>(st.st_dev);
  in.mtime_ns_ = mtime_ns(st);
  auto m = detail::MappedFile::open(path);
  if (!m) {
    Error e = std::move(m).error();
    e.message = fmt::format("{}: {}", path, e.message);
    return e;
  }
  in.map_ = std::move(*m);
  if (in.map_.bytes().size() != in.size_)
    return make_error(Errc::io_error, fmt::format("{}: file changed while reading (size {}, then {})",
                                                  path, in.size_, in.map_.bytes().size()));
  return in;
}

Result<void> Input::check_unchanged() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0)
    return make_error(Errc::io_error, fmt::format("{}: file changed while reading (it is gone: {})",
                                                  path_, detail::errno_text(errno)));
  // Growth is not a change (a writer appending leaves the mapped bytes as they were); a shorter
  // file, another file under the name, or a rewrite in place are.
  const bool rewritten = static_cast<uint64_t>(st.st_size) == size_ && mtime_ns(st) != mtime_ns_;
  if (static_cast<uint64_t>(st.st_size) < size_ || static_cast<uint64_t>(st.st_ino) != ino_ ||
      static_cast<uint64_t>(st.st_dev) != dev_ || rewritten)
    return make_error(Errc::io_error,
                      fmt::format("{}: file changed while reading (size {} at open, {} now)", path_,
                                  size_, static_cast<uint64_t>(st.st_size)));
  return {};
}

Result<void> refuse_same_file(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(in, out, ec))
    return make_error(Errc::invalid_argument,
                      fmt::format("output {} is the input file; choose another name (driftscope "
                                  "never modifies its inputs)", out));
  return {};
}

Result<TempOutput> TempOutput::create(const std::string& target) {
  // mkstemp: a unique name created exclusively, with no random source that could throw.
  std::string tmpl = target + ".tmp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0)
    return make_error(Errc::io_error, fmt::format("{}: cannot create a temporary file next to it: {}",
                                                  target, detail::errno_text(errno)));
  ::close(fd);
  // The name stays reserved by its random part; the writers create the file again so it gets
  // the usual mode (0666 less umask) instead of mkstemp's 0600.
  ::unlink(buf.data());
  TempOutput t;
  t.target_ = target;
  t.temp_ = buf.data();
  t.live_ = true;
  return t;
}

TempOutput::TempOutput(TempOutput&& o) noexcept
    : target_(std::move(o.target_)), temp_(std::move(o.temp_)), live_(std::exchange(o.live_, false)) {}

TempOutput::~TempOutput() {
  if (live_) ::unlink(temp_.c_str());
}

Result<void> TempOutput::commit() {
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    return make_error(Errc::io_error, fmt::format("{}: cannot rename {} to it: {}", target_, temp_,
                                                  detail::errno_text(errno)));
  live_ = false;
  return {};
}

}  // namespace driftscope::interop
