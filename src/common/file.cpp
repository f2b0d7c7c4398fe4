#include "common/out_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace driftscope {

using detail::errno_text;

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(Errc::io_error, fmt::format("{} '{}': {}", what, path, errno_text(err)));
}

#ifdef O_DIRECT
constexpr int kDirectFlag = O_DIRECT;
#else
constexpr int kDirectFlag = 0;  // no direct I/O here: every write goes through the page cache
#endif

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Error not_regular(const std::string& path, mode_t mode) {
  return make_error(Errc::io_error,
                    fmt::format("cannot read '{}': it is {}, not a regular file", path, kind_of(mode)));
}

Result<void> write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// ---- the SIGBUS guard ----------------------------------------------------------------------------
// A page of a file mapping that lies wholly past the file's current end raises SIGBUS when touched
// (a writer truncated the file after we mapped it). Every map registers its address range here; the
// handler maps anonymous zero pages over the rest of a registered range, marks it, and returns, so
// the faulting load is retried and reads zeros. Faults anywhere else go to the previous handler.
// Everything the handler touches is a lock-free atomic in static storage (async-signal-safe).
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};  // 0 while the slot is being filled or emptied
  std::atomic<uintptr_t> end{0};    // page-rounded
  std::atomic<bool> faulted{false};
};
// Two dump sets of the maximum size (kMaxWorldSize ranks each) plus the files around them.
constexpr int kSlots = 16384;
Slot g_slots[kSlots];
std::atomic<int> g_slots_in_use_bound{0};  // slots at or above this index were never used
struct sigaction g_previous {};
std::once_flag g_install_once;
uintptr_t g_page_size = 4096;

void chain_to_previous(int sig, siginfo_t* info, void* ctx) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  // Default action (also for SIG_IGN: a hardware fault cannot be ignored): restore it and let the
  // signal through again, so the process dies exactly as it would have without us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const int bound = g_slots_in_use_bound.load(std::memory_order_acquire);
  if (info->si_code > 0) {  // a fault, not a kill(2)
    for (int i = 0; i < bound; ++i) {
      Slot& s = g_slots[i];
      const uintptr_t b = s.begin.load(std::memory_order_acquire);
      const uintptr_t e = s.end.load(std::memory_order_acquire);
      if (b == 0 || addr < b || addr >= e) continue;
      const uintptr_t page = addr & ~(g_page_size - 1);
      void* p = ::mmap(reinterpret_cast<void*>(page), e - page, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p != MAP_FAILED) {
        s.faulted.store(true, std::memory_order_release);
        errno = saved_errno;
        return;
      }
      break;
    }
  }
  errno = saved_errno;
  chain_to_previous(sig, info, ctx);
}

void install_handler() {
  long ps = ::sysconf(_SC_PAGESIZE);
  if (ps > 0) g_page_size = static_cast<uintptr_t>(ps);
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  // Not SA_ONSTACK: this SIGBUS is a load from a truncated file, never a stack overflow, and the
  // thread's alternate stack is not ours to trust: a library that installed one and later freed
  // it would turn every guarded SIGBUS into a SIGSEGV (the kernel cannot build the frame there).
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

int register_map(const void* data, size_t size) {
  std::call_once(g_install_once, install_handler);
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    const auto b = reinterpret_cast<uintptr_t>(data);
    const uintptr_t e = b + ((size + g_page_size - 1) & ~(g_page_size - 1));
    g_slots[i].faulted.store(false, std::memory_order_relaxed);
    g_slots[i].end.store(e, std::memory_order_release);
    g_slots[i].begin.store(b, std::memory_order_release);
    int bound = g_slots_in_use_bound.load(std::memory_order_acquire);
    while (bound < i + 1 &&
           !g_slots_in_use_bound.compare_exchange_weak(bound, i + 1, std::memory_order_acq_rel)) {
    }
    return i;
  }
  return -1;
}

void unregister_map(int slot) {
  if (slot < 0) return;
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].end.store(0, std::memory_order_release);
  g_slots[slot].used.store(false, std::memory_order_release);
}

}  // namespace

// ---- inputs ---------------------------------------------------------------------------------------

Result<int> open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    struct stat st {};
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return not_regular(path, st.st_mode);  // a socket
    return io_error("cannot open", path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular(path, st.st_mode);
  }
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int err = errno;
    ::close(fd);
    return io_error("cannot open", path, err);
  }
  return fd;
}

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  auto fd = open_regular_file(path);
  if (!fd) return std::move(fd).error();
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(*fd);
      return io_error("cannot read", path, err);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(*fd);
      return make_error(Errc::limit_exceeded,
                        fmt::format("'{}' is larger than {} bytes", path, max_bytes));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  return out;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  auto fd = open_regular_file(path);
  if (!fd) return std::move(fd).error();
  MappedFile m;
  m.fd_ = *fd;
  m.path_ = path;
  struct stat st {};
  if (::fstat(m.fd_, &st) != 0) return io_error("cannot stat", path, errno);
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    // MAP_PRIVATE + PROT_READ: the reader can never modify its input.
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, m.fd_, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      m.size_ = 0;
      return io_error("cannot map", path, err);
    }
    m.data_ = static_cast<const std::byte*>(p);
    m.slot_ = register_map(m.data_, m.size_);
    if (m.slot_ < 0)
      return make_error(Errc::io_error, fmt::format("cannot map '{}': more than {} files mapped at once",
                                                    path, kSlots));
  }
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      slot_(std::exchange(o.slot_, -1)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
    slot_ = std::exchange(o.slot_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  unregister_map(std::exchange(slot_, -1));
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

Result<void> MappedFile::check_unchanged() const {
  if (fd_ < 0) return {};
  const bool faulted = slot_ >= 0 && g_slots[slot_].faulted.load(std::memory_order_acquire);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return io_error("cannot stat", path_, errno);
  const auto now = static_cast<uint64_t>(st.st_size);
  if (!faulted && now >= size_) return {};
  return make_error(Errc::io_error,
                    fmt::format("{}: file changed while reading (it shrank from {} to {} bytes); "
                                "read it again once its writer is done",
                                path_, size_, now));
}

// ---- outputs --------------------------------------------------------------------------------------

Result<void> refuse_input_as_output(const std::string& out, std::span<const std::string> inputs) {
  struct stat so {};
  if (::stat(out.c_str(), &so) != 0) return {};  // does not exist (yet): cannot be an input
  for (const std::string& in : inputs) {
    struct stat si {};
    if (::stat(in.c_str(), &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
      return make_error(Errc::invalid_argument,
                        fmt::format("output {} is the input file; choose another name (driftscope "
                                    "never modifies its inputs)",
                                    out));
  }
  return {};
}

Result<AtomicOutput> AtomicOutput::create(const std::string& target, std::span<const std::string> inputs) {
  DRIFTSCOPE_TRY(refuse_input_as_output(target, inputs));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return make_error(Errc::io_error, fmt::format("cannot write '{}': it is {}, not a regular file",
                                                  target, kind_of(st.st_mode)));
  // Same directory as the target, so the rename is atomic (never across file systems).
  AtomicOutput out;
  out.target_ = target;
  std::string templ = target + ".tmp-XXXXXX";
  int fd = ::mkostemp(templ.data(), O_CLOEXEC);
  if (fd < 0) return io_error("cannot create a temporary file for", target, errno);
  ::fchmod(fd, 0644);
  out.temp_ = std::move(templ);
  out.fd_ = fd;
  out.committed_ = false;
  return out;
}

AtomicOutput::AtomicOutput(AtomicOutput&& o) noexcept
    : target_(std::move(o.target_)),
      temp_(std::move(o.temp_)),
      fd_(std::exchange(o.fd_, -1)),
      committed_(std::exchange(o.committed_, true)),
      written_(std::exchange(o.written_, 0)),
      queued_(std::exchange(o.queued_, 0)),
      direct_(std::move(o.direct_)),
      direct_refused_(std::exchange(o.direct_refused_, false)) {}

AtomicOutput& AtomicOutput::operator=(AtomicOutput&& o) noexcept {
  if (this != &o) {
    discard();
    target_ = std::move(o.target_);
    temp_ = std::move(o.temp_);
    fd_ = std::exchange(o.fd_, -1);
    committed_ = std::exchange(o.committed_, true);
    written_ = std::exchange(o.written_, 0);
    queued_ = std::exchange(o.queued_, 0);
    direct_ = std::move(o.direct_);
    direct_refused_ = std::exchange(o.direct_refused_, false);
  }
  return *this;
}

AtomicOutput::~AtomicOutput() { discard(); }

// The blocks written around the page cache (file.hpp). Two buffers: write() fills one while the
// thread writes the other. A block is written at an offset and of a size that are multiples of
// kAlign from an address aligned to it (O_DIRECT's rule; 4096 covers the logical block size of
// the devices in use); a file system that still answers EINVAL gets the rest through the page
// cache. The tail, less than a block, goes through the page cache at commit.
struct AtomicOutput::Direct {
  static constexpr size_t kAlign = 4096;
  static constexpr size_t kBlock = size_t{4} << 20;
  int fd = -1;
  std::string path;
  char* buf[2] = {nullptr, nullptr};
  int cur = 0;          // the buffer write() fills
  size_t fill = 0;      // bytes in it
  uint64_t offset = 0;  // the file offset of its first byte
  std::mutex m;
  std::condition_variable cv;
  bool busy = false, stop = false;  // busy: the other buffer is being written
  int job = 0;
  uint64_t job_offset = 0;
  int err = 0;  // the first failed write's errno
  std::thread thread;

  Direct(int fd_in, std::string path_in, uint64_t at) : fd(fd_in), path(std::move(path_in)), offset(at) {}
  ~Direct() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    std::free(buf[0]);
    std::free(buf[1]);
  }
  bool start() {
    buf[0] = static_cast<char*>(std::aligned_alloc(kAlign, kBlock));
    buf[1] = static_cast<char*>(std::aligned_alloc(kAlign, kBlock));
    if (!buf[0] || !buf[1]) return false;
    try {
      thread = std::thread([this] { run(); });
    } catch (...) {
      return false;
    }
    return true;
  }
  // Writes n bytes of p at `at`; 0 or the errno.
  int write_block(const char* p, size_t n, uint64_t at) {
    while (n > 0) {
      ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(at));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & kDirectFlag)) {
        int fl = ::fcntl(fd, F_GETFL);
        if (::fcntl(fd, F_SETFL, fl & ~kDirectFlag) != 0) return errno;
        continue;
      }
      if (w < 0) return errno;
      if (w == 0) return EIO;
      p += w;
      n -= static_cast<size_t>(w);
      at += static_cast<uint64_t>(w);
    }
    return 0;
  }
  void run() {
    std::unique_lock lock(m);
    for (;;) {
      cv.wait(lock, [&] { return busy || stop; });
      if (!busy) return;
      const int b = job;
      const uint64_t at = job_offset;
      const bool failed = err != 0;  // nothing more is written after a failure
      lock.unlock();
      const int e = failed ? 0 : write_block(buf[b], kBlock, at);
      lock.lock();
      if (e && !err) err = e;
      busy = false;
      cv.notify_all();
    }
  }
  // Waits for the block in flight; its errno, or the first earlier one.
  int wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return !busy; });
    return err;
  }
  // Hands the full buffer to the thread and fills the other.
  int submit() {
    if (int e = wait()) return e;
    {
      std::lock_guard lock(m);
      job = cur;
      job_offset = offset;
      busy = true;
    }
    cv.notify_all();
    cur ^= 1;
    fill = 0;
    offset += kBlock;
    return 0;
  }
};

Result<void> AtomicOutput::write_direct(std::string_view data) {
  Direct& d = *direct_;
  while (!data.empty()) {
    const size_t n = std::min(data.size(), Direct::kBlock - d.fill);
    std::memcpy(d.buf[d.cur] + d.fill, data.data(), n);
    d.fill += n;
    data.remove_prefix(n);
    if (d.fill == Direct::kBlock)
      if (int e = d.submit()) return io_error("cannot write", temp_, e);
  }
  return {};
}

// Waits for the thread, then writes the tail through the page cache.
Result<void> AtomicOutput::finish_direct() {
  Direct& d = *direct_;
  if (int e = d.wait()) return io_error("cannot write", temp_, e);
  int fl = ::fcntl(fd_, F_GETFL);
  if (fl < 0 || ((fl & kDirectFlag) && ::fcntl(fd_, F_SETFL, fl & ~kDirectFlag) != 0))
    return io_error("cannot write", temp_, errno);
  if (int e = d.write_block(d.buf[d.cur], d.fill, d.offset)) return io_error("cannot write", temp_, e);
  // The descriptor's own offset is where write() would go on (a later write() appends).
  if (::lseek(fd_, static_cast<off_t>(d.offset + d.fill), SEEK_SET) < 0) return io_error("cannot write", temp_, errno);
  direct_.reset();
  direct_refused_ = true;  // what follows goes through the page cache
  return {};
}

void AtomicOutput::discard() noexcept {
  direct_.reset();  // stops its thread before the descriptor closes
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!committed_) ::unlink(temp_.c_str());
  committed_ = true;
}

Result<void> AtomicOutput::write(std::string_view data) {
  if (fd_ < 0) return make_error(Errc::closed, fmt::format("'{}' is already committed", target_));
  if (direct_) {
    DRIFTSCOPE_TRY(write_direct(data));
    written_ += data.size();
    return {};
  }
  // Large outputs only: a small report is one write through the page cache, as before. The
  // switch comes at an aligned offset; the bytes up to it go through the page cache.
  constexpr uint64_t kDirectFrom = uint64_t{16} << 20;
  if (kDirectFlag && !direct_refused_ && written_ + data.size() >= kDirectFrom) {
    const uint64_t aligned = (written_ + Direct::kAlign - 1) / Direct::kAlign * Direct::kAlign;
    const size_t head = static_cast<size_t>(std::min<uint64_t>(aligned - written_, data.size()));
    if (head < data.size()) {
      DRIFTSCOPE_TRY(write_all(fd_, data.substr(0, head), temp_));
      written_ += head;
      data.remove_prefix(head);
      const int fl = ::fcntl(fd_, F_GETFL);
      auto d = std::make_unique<Direct>(fd_, temp_, written_);
      if (fl >= 0 && ::fcntl(fd_, F_SETFL, fl | kDirectFlag) == 0) {
        if (d->start()) {
          direct_ = std::move(d);
          DRIFTSCOPE_TRY(write_direct(data));
          written_ += data.size();
          return {};
        }
        (void)::fcntl(fd_, F_SETFL, fl);
      }
      direct_refused_ = true;  // (tmpfs, for one): the page cache, as before
    }
  }
  DRIFTSCOPE_TRY(write_all(fd_, data, temp_));
  written_ += data.size();
#ifdef __linux__
  // Write-behind: start the disk on each 32 MiB as it is written, so that commit()'s fsync waits
  // for the tail only. A 2.75 GB report (1,000,000 pairs) otherwise left all of it to the fsync,
  // seconds after the last byte was formatted. Only a hint: a failure shows at the fsync.
  constexpr uint64_t kWriteBehind = uint64_t{32} << 20;
  if (written_ - queued_ >= kWriteBehind) {
    (void)::sync_file_range(fd_, static_cast<off_t>(queued_), static_cast<off_t>(written_ - queued_),
                            SYNC_FILE_RANGE_WRITE);
    queued_ = written_;
  }
#endif
  return {};
}

Result<void> AtomicOutput::commit() {
  if (committed_) return make_error(Errc::closed, fmt::format("'{}' is already committed", target_));
  if (direct_) DRIFTSCOPE_TRY(finish_direct());
  // Whoever wrote through temp_path() has closed their descriptor; ours sees the same inode.
  if (::fsync(fd_) != 0) return io_error("cannot sync", temp_, errno);
  if (::close(std::exchange(fd_, -1)) != 0) return io_error("cannot close", temp_, errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    return make_error(Errc::io_error, fmt::format("cannot rename {} to {}: {}", temp_, target_,
                                                  errno_text(errno)));
  committed_ = true;
  return {};
}

Result<OutputFile> OutputFile::open(const std::string& path, std::span<const std::string> inputs) {
  OutputFile f;
  f.path_ = path;
  if (path == "-") {
    std::fflush(stdout);  // what was printed before comes first
    f.fd_ = STDOUT_FILENO;
    return f;
  }
  DRIFTSCOPE_TRY(refuse_input_as_output(path, inputs));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
    // A stream (a pipe, /dev/stdout, /dev/null): write in place; replacing it by a renamed regular
    // file would break the pipe or, run as root, replace a device node. O_NONBLOCK makes opening a
    // FIFO without a reader fail (ENXIO) instead of waiting.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return io_error("cannot open", path, errno);
    f.fd_ = fd;
    f.own_fd_ = true;
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return io_error("cannot open", path, errno);
    return f;
  }
  auto a = AtomicOutput::create(path, inputs);
  if (!a) return std::move(a).error();
  f.atomic_ = std::make_unique<AtomicOutput>(std::move(*a));
  return f;
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      own_fd_(std::exchange(o.own_fd_, false)),
      atomic_(std::move(o.atomic_)) {}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    if (own_fd_ && fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    own_fd_ = std::exchange(o.own_fd_, false);
    atomic_ = std::move(o.atomic_);
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

Result<void> OutputFile::write(std::string_view data) {
  if (atomic_) return atomic_->write(data);
  if (fd_ < 0) return make_error(Errc::closed, fmt::format("'{}' is already committed", path_));
  return write_all(fd_, data, path_ == "-" ? std::string("stdout") : path_);
}

Result<void> OutputFile::commit() {
  if (atomic_) return atomic_->commit();
  if (fd_ < 0) return make_error(Errc::closed, fmt::format("'{}' is already committed", path_));
  const int fd = std::exchange(fd_, -1);
  if (own_fd_ && ::close(fd) != 0) return io_error("cannot close", path_, errno);
  own_fd_ = false;
  return {};
}

Result<void> write_output_file(const std::string& path, std::string_view data,
                               std::span<const std::string> inputs) {
  auto f = OutputFile::open(path, inputs);
  if (!f) return std::move(f).error();
  DRIFTSCOPE_TRY(f->write(data));
  return f->commit();
}

}  // namespace driftscope

namespace driftscope::detail {

std::string errno_text(int err) { return std::strerror(err); }

namespace {
Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(Errc::io_error, fmt::format("{} '{}': {}", what, path, errno_text(err)));
}
}  // namespace

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
  // Non-blocking open, then S_ISREG: appending to a FIFO or device is refused, never waited on.
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return io_error("cannot open for append", path, errno);
  struct stat st {};
  int fl = -1;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (fl = ::fcntl(fd, F_GETFL)) < 0 ||
      ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int err = errno;
    ::close(fd);
    if (st.st_mode != 0 && !S_ISREG(st.st_mode))
      return make_error(Errc::io_error, fmt::format("cannot append to '{}': not a regular file", path));
    return io_error("cannot open for append", path, err);
  }
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

void OutFile::start_writeback(uint64_t offset, uint64_t size) noexcept {
#if defined(__linux__)
  (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                          SYNC_FILE_RANGE_WRITE);
#else
  (void)offset;
  (void)size;
#endif
}

void OutFile::evict(uint64_t offset, uint64_t size) noexcept {
  // POSIX_FADV_DONTNEED skips dirty pages and pages under writeback, so wait for the range first.
#if defined(__linux__)
  (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER);
#endif
#if defined(POSIX_FADV_DONTNEED)
  (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                        POSIX_FADV_DONTNEED);
#else
  (void)offset;
  (void)size;
#endif
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
