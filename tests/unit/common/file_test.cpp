// The file rules of driftscope/file.hpp (issue 7, bugs 4, 5 and 8): only regular files are read and
// nothing blocks on a FIFO; a mapped input that shrinks while it is read gives "file changed while
// reading", never SIGBUS, on any thread; outputs never replace an input and are renamed into place.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/thread_pool.hpp"
#include "driftscope/compare.hpp"
#include "driftscope/file.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"

namespace fs = std::filesystem;
using namespace driftscope;

namespace {

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Death tests re-execute the binary: each runs in a fresh process without our handler. Such a
    // child runs the test again up to its death, never reaching TearDown, so its folder is named
    // after its parent's and the parent's TearDown removes it too.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const bool child = !GTEST_FLAG_GET(internal_run_death_test).empty();
    prefix_ = "ds-file-" + std::to_string(child ? ::getppid() : ::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / (child ? prefix_ + "-" + std::to_string(::getpid()) : prefix_);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name == prefix_ || name.rfind(prefix_ + "-", 0) == 0) fs::remove_all(e.path(), ec);
    }
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string prefix_;
  fs::path dir_;
};

void write_bytes(const std::string& p, size_t n, char fill) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  std::string s(n, fill);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A dump of `n` f32 tensors of `numel` elements each.
void write_dump(const std::string& p, size_t n, size_t numel, float offset = 0) {
  auto w = Writer::create(p);
  ASSERT_TRUE(w) << w.error().to_string();
  std::vector<float> v(numel);
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < numel; ++k) v[k] = offset + static_cast<float>(i * 7 + k % 13) + 1.0f;
    TensorInfo t;
    t.name = "layer." + std::to_string(i);
    t.dtype = DType::f32;
    t.shape = {numel};
    ASSERT_TRUE((*w)->write(t, std::as_bytes(std::span<const float>(v))));
  }
  ASSERT_TRUE((*w)->close());
}

void truncate_file(const std::string& p, off_t size) {
  int fd = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, size), 0);
  ::close(fd);
}

// ---- bug 8: non-regular inputs are refused without blocking -----------------------------------

// Each open runs in a child with an alarm: an open that blocks dies of SIGALRM and fails the test.
TEST_F(FileTest, FifoInputIsRefusedWithoutBlocking) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EXIT(
      {
        ::alarm(5);
        auto r = Reader::open(fifo);
        bool ok = !r && r.error().code == Errc::io_error &&
                  r.error().message.find("it is a FIFO, not a regular file") != std::string::npos;
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::alarm(5);
        auto p = Policy::load(fifo);
        std::_Exit(!p && p.error().message.find("FIFO") != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::alarm(5);
        auto m = NameMap::load(fifo);
        std::_Exit(!m && m.error().message.find("FIFO") != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::alarm(5);
        CompareOptions o;
        auto rep = compare_files(fifo, fifo, o);
        std::_Exit(!rep && rep.error().message.find("FIFO") != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::alarm(5);
        WriterOptions o;
        o.append = true;
        auto w = Writer::create(fifo, o);
        std::_Exit(!w ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(FileTest, EveryNonRegularKindIsNamed) {
  auto expect_kind = [](const std::string& p, const std::string& kind) {
    auto fd = open_regular_file(p);
    ASSERT_FALSE(fd) << p;
    EXPECT_EQ(fd.error().code, Errc::io_error);
    EXPECT_EQ(fd.error().message, "cannot read '" + p + "': it is " + kind + ", not a regular file");
  };
  expect_kind(dir_.string(), "a directory");
  expect_kind("/dev/null", "a character device");
  const std::string sock = path("sock");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  expect_kind(sock, "a socket");
  ::close(s);
  auto missing = open_regular_file(path("missing"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("No such file"), std::string::npos);
  write_bytes(path("plain"), 10, 'x');
  auto fd = open_regular_file(path("plain"));
  ASSERT_TRUE(fd);
  EXPECT_EQ(::fcntl(*fd, F_GETFL) & O_NONBLOCK, 0);  // blocking again for the caller
  ::close(*fd);
}

TEST_F(FileTest, ReadSmallFileHonoursItsLimit) {
  write_bytes(path("p.toml"), 100, 'a');
  auto ok = read_small_file(path("p.toml"), 100);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), 100u);
  auto big = read_small_file(path("p.toml"), 99);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, Errc::limit_exceeded);
}

// ---- bug 5: a mapped input that shrinks while it is read --------------------------------------

TEST_F(FileTest, ShrinkingMapReadsZerosAndReportsTheChange) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::string p = path("live");
  write_bytes(p, static_cast<size_t>(page) * 64, 'x');
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m) << m.error().to_string();
  auto b = m->bytes();
  EXPECT_EQ(static_cast<char>(b[0]), 'x');
  EXPECT_TRUE(m->check_unchanged());
  truncate_file(p, page);  // a writer cut the file under us
  // Every page, touched from the pool's threads, as the compare engine does.
  std::atomic<uint64_t> sum{0};
  detail::parallel_for(
      64, [&](size_t i) { sum += static_cast<unsigned char>(b[i * static_cast<size_t>(page) + 7]); }, 4);
  EXPECT_EQ(sum.load(), static_cast<uint64_t>('x'));  // only page 0 is still there
  auto c = m->check_unchanged();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Errc::io_error);
  EXPECT_EQ(c.error().message,
            p + ": file changed while reading (it shrank from " + std::to_string(page * 64) + " to " +
                std::to_string(page) + " bytes); read it again once its writer is done");
}

TEST_F(FileTest, ShrinkInsideTheLastPageIsAChangeToo) {
  const std::string p = path("live");
  write_bytes(p, 1000, 'x');
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m);
  truncate_file(p, 10);  // no page vanished: no fault, but the size says it
  EXPECT_FALSE(m->check_unchanged());
}

TEST_F(FileTest, GrowingFileIsNotAChange) {
  const std::string p = path("live");
  write_bytes(p, 5000, 'x');
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m);
  std::ofstream(p, std::ios::binary | std::ios::app) << std::string(100000, 'y');
  EXPECT_TRUE(m->check_unchanged());
  EXPECT_EQ(m->bytes().size(), 5000u);
}

TEST_F(FileTest, ReaderOfATruncatedDumpSaysFileChanged) {
  const std::string p = path("run.tdump");
  write_dump(p, 64, 4096);
  OpenOptions o;
  o.verify = Verify::frames;
  auto r = Reader::open(p, o);
  ASSERT_TRUE(r) << r.error().to_string();
  truncate_file(p, 4096);
  for (const Record& rec : r->records()) (void)r->verify_payload(rec);  // reads zeros, survives
  auto c = r->check_unchanged();
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("file changed while reading"), std::string::npos);
}

TEST_F(FileTest, CompareOfADumpCutMidwayFailsCleanly) {
  const std::string a = path("a.tdump"), b = path("b.tdump");
  write_dump(a, 1200, 2048);
  write_dump(b, 1200, 2048, 0.5f);
  CompareOptions o;
  o.threads = 4;
  bool cut = false;
  // Called between batches of pairs: the later batches, on the pool's threads, meet the cut.
  o.progress = [&](size_t, size_t) {
    if (!cut) truncate_file(b, 64 * 1024);
    cut = true;
  };
  auto rep = compare_files(a, b, o);
  ASSERT_TRUE(cut);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.error().code, Errc::io_error);
  EXPECT_NE(rep.error().message.find(b + ": file changed while reading"), std::string::npos)
      << rep.error().message;
}

// A SIGBUS outside our maps still reaches the handler that was there before ours.
TEST_F(FileTest, ForeignSigbusGoesToThePreviousHandler) {
  const std::string mine = path("mine"), foreign = path("foreign");
  write_bytes(mine, 8192, 'x');
  write_bytes(foreign, 65536, 'y');
  EXPECT_EXIT(
      {
        struct sigaction sa {};
        sa.sa_handler = [](int) { std::_Exit(42); };
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, nullptr);
        auto m = MappedFile::open(mine);  // installs our handler, chained to the one above
        if (!m) std::_Exit(1);
        int fd = ::open(foreign.c_str(), O_RDONLY);
        auto* p = static_cast<volatile const char*>(::mmap(nullptr, 65536, PROT_READ, MAP_PRIVATE, fd, 0));
        truncate_file(foreign, 0);
        (void)p[60000];  // not ours: chained
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(42), "");
  EXPECT_EXIT(
      {
        // The default action before ours (a sanitizer runtime may have installed its own).
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        ::sigaction(SIGBUS, &dfl, nullptr);
        auto m = MappedFile::open(mine);
        if (!m) std::_Exit(1);
        int fd = ::open(foreign.c_str(), O_RDONLY);
        auto* p = static_cast<volatile const char*>(::mmap(nullptr, 65536, PROT_READ, MAP_PRIVATE, fd, 0));
        truncate_file(foreign, 0);
        (void)p[60000];  // not ours and no previous handler: the default action
        std::_Exit(2);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// ---- bug 4: outputs never replace an input ------------------------------------------------------

TEST_F(FileTest, OutputNamingAnInputIsRefused) {
  const std::string in = path("in.tdump");
  write_bytes(in, 100, 'i');
  fs::create_symlink(in, path("link.json"));
  fs::create_hard_link(in, path("hard.json"));
  const std::string inputs[] = {path("other.tdump"), in};
  for (const std::string& out : {in, path("link.json"), path("hard.json"), path("./in.tdump")}) {
    auto w = write_output_file(out, "{}", inputs);
    ASSERT_FALSE(w) << out;
    EXPECT_EQ(w.error().code, Errc::invalid_argument);
    EXPECT_EQ(w.error().message, "output " + out +
                                     " is the input file; choose another name (driftscope never "
                                     "modifies its inputs)");
    auto a = AtomicOutput::create(out, inputs);
    EXPECT_FALSE(a) << out;
  }
  EXPECT_EQ(slurp(in), std::string(100, 'i'));
  // A fresh name, and a copy with equal bytes, are not the input.
  write_bytes(path("copy.json"), 100, 'i');
  EXPECT_TRUE(write_output_file(path("copy.json"), "{}", inputs));
  EXPECT_TRUE(write_output_file(path("new.json"), "{}", inputs));
  EXPECT_EQ(slurp(path("copy.json")), "{}");
  EXPECT_EQ(slurp(in), std::string(100, 'i'));
}

TEST_F(FileTest, AtomicOutputIsRenamedIntoPlaceAndLeavesNoLitter) {
  const std::string out = path("report.json");
  write_bytes(out, 10, 'o');
  // Someone maps the old report: it must survive the replacement (a new inode, not a rewrite).
  auto old = MappedFile::open(out);
  ASSERT_TRUE(old);
  {
    auto a = AtomicOutput::create(out);
    ASSERT_TRUE(a);
    EXPECT_EQ(fs::path(a->temp_path()).parent_path(), dir_);
    ASSERT_TRUE(a->write("half"));
    EXPECT_EQ(slurp(out), std::string(10, 'o'));  // not yet
  }  // dropped without commit: the target is untouched, the temporary file gone
  EXPECT_EQ(slurp(out), std::string(10, 'o'));
  ASSERT_TRUE(write_output_file(out, "new report"));
  EXPECT_EQ(slurp(out), "new report");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(old->bytes().data()), 10), std::string(10, 'o'));
  EXPECT_TRUE(old->check_unchanged());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().filename() != "report.json";
  EXPECT_EQ(files, 0u);
}

// Past its first 16 MiB a large output is written around the page cache in aligned blocks by a
// thread (issue 30 item 4: a 2.75 GB report spent most of its time copying into the cache): the
// bytes are exactly those written, in pieces of any size; those pages are not left in the cache
// (where the file system takes O_DIRECT); dropping an uncommitted output mid-way leaves no file,
// and a moved one goes on. Fails before: every page of the report was in the page cache.
TEST_F(FileTest, LargeOutputsBypassThePageCacheWithTheSameBytes) {
  const std::string out = path("big.json");
  std::string expect;
  uint64_t x = 88172645463325252ull;
  auto piece = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>('a' + x % 26);
    }
    return s;
  };
  {
    auto a = AtomicOutput::create(out);
    ASSERT_TRUE(a);
    for (size_t i = 0; expect.size() < (size_t{40} << 20); ++i) {
      const size_t n = i % 5 == 0 ? 1 : i % 5 == 1 ? 4095 : i % 5 == 2 ? (size_t{1} << 20) + 3 : i % 5 == 3 ? 7 : 300001;
      std::string s = piece(n);
      ASSERT_TRUE(a->write(s));
      expect += s;
      if (i == 40) {  // moved while a block may be in flight
        AtomicOutput moved = std::move(*a);
        *a = std::move(moved);
      }
    }
    ASSERT_TRUE(a->commit());
  }
  // Which of the file's pages the page cache holds, looked at before anything reads them.
  int probe = ::open(path("probe").c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0644);
  const bool direct_io = probe >= 0;
  if (probe >= 0) ::close(probe);
  if (direct_io) {
    int fd = ::open(out.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    const size_t size = expect.size(), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(m, MAP_FAILED);
    std::vector<unsigned char> in_cache((size + page - 1) / page);
    ASSERT_EQ(::mincore(m, size, in_cache.data()), 0);
    // From 17 MiB to 4 MiB before the end: the blocks the thread wrote.
    size_t cached = 0, pages = 0;
    for (size_t p = (size_t{17} << 20) / page; p < (size - (size_t{5} << 20)) / page; ++p, ++pages)
      cached += in_cache[p] & 1;
    EXPECT_GT(pages, 1000u);
    EXPECT_LT(cached, pages / 10) << cached << " of " << pages << " pages in the page cache";
    ::munmap(m, size);
    ::close(fd);
  }
  EXPECT_TRUE(slurp(out) == expect);
  EXPECT_EQ(fs::file_size(out), expect.size());
  {
    auto a = AtomicOutput::create(path("dropped.json"));
    ASSERT_TRUE(a);
    ASSERT_TRUE(a->write(piece(size_t{30} << 20)));
  }  // dropped with a block in flight: its thread stops, the temporary file goes
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().filename() != "big.json" && e.path().filename() != "probe";
  EXPECT_EQ(files, 0u);
}

TEST_F(FileTest, StreamsAreWrittenInPlaceAndNeverBlock) {
  // /dev/null stays a device (run as root, a rename would have replaced it by a file).
  ASSERT_TRUE(write_output_file("/dev/null", "report"));
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EXIT(
      {
        ::alarm(5);
        auto w = write_output_file(fifo, "report");  // nobody reads: an error, not a wait
        std::_Exit(!w && w.error().code == Errc::io_error ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  // A directory is refused.
  auto d = write_output_file(dir_.string(), "x");
  EXPECT_FALSE(d);
}

}  // namespace
