#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "test_util.hpp"

using namespace driftscope;
using dstest::as_bytes;

namespace {

WriterOptions fixed(uint64_t salt = 0x0123456789abcdefull) {
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = salt;
  o.metadata = {{"framework", "test"}, {"precision", "float32"}};
  return o;
}

}  // namespace

TEST(WriterReader, RoundTripsEveryDescriptorField) {
  std::string path = dstest::scratch_path("roundtrip");
  {
    auto w = Writer::create(path, fixed());
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    TensorInfo t = dstest::f32_info("encoder.layers.0.norm", {2, 3});
    t.axes = {"seq", "hidden"};
    t.attrs = {{"torch_path", "[0]"}, {"note", "héllo"}};
    t.role = Role::input;
    t.role_index = 2;
    auto v = dstest::ramp(6, 0.5f);
    auto r = (*w)->write(t, as_bytes(v));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->status, WriteStatus::written);
    EXPECT_EQ(r->exec_index, 0u);
    EXPECT_EQ(r->occurrence, 0u);

    TensorInfo q;
    q.name = "encoder.layers.0.fc";
    q.dtype = DType::i8;
    q.shape = {3, 2};
    q.encoding.kind = EncodingKind::affine_channel;
    q.encoding.axis = 0;
    q.encoding.scales = {0.5, 0.25, 2.0};
    q.encoding.zero_points = {0, -3, 7};
    std::vector<int8_t> qv = {1, -2, 3, -4, 5, -6};
    ASSERT_TRUE((*w)->write(q, as_bytes(qv)).ok());

    TensorInfo s;  // rank 0
    s.name = "loss";
    s.dtype = DType::f64;
    std::vector<double> sv = {3.25};
    ASSERT_TRUE((*w)->write(s, as_bytes(sv)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  for (bool use_index : {true, false}) {
    OpenOptions oo;
    oo.use_index = use_index;
    auto r = Reader::open(path, oo);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->integrity().state, FileState::clean);
    EXPECT_EQ(r->integrity().index_used, use_index);
    EXPECT_EQ(r->header().get("framework"), "test");
    EXPECT_EQ(r->header().get("writer").substr(0, 10), "driftscope");
    ASSERT_EQ(r->records().size(), 3u);
    const Record& a = r->records()[0];
    EXPECT_EQ(a.info.name, "encoder.layers.0.norm");
    EXPECT_EQ(a.info.op_type, "Linear");
    EXPECT_EQ(a.info.role, Role::input);
    EXPECT_EQ(a.info.role_index, 2);
    EXPECT_EQ(a.info.axes, (std::vector<std::string>{"seq", "hidden"}));
    EXPECT_EQ(a.info.attrs[1].second, "héllo");
    EXPECT_EQ(a.payload_offset % 64, 0u);
    ASSERT_EQ(a.payload.size(), 24u);
    float f4;
    std::memcpy(&f4, a.payload.data() + 16, 4);
    EXPECT_EQ(f4, 2.0f);
    const Record& b = r->records()[1];
    EXPECT_EQ(b.info.exec_index, 1u);
    EXPECT_EQ(b.info.encoding.kind, EncodingKind::affine_channel);
    EXPECT_EQ(b.info.encoding.zero_points[2], 7);
    EXPECT_EQ(r->records()[2].info.shape.size(), 0u);
    EXPECT_EQ(r->find("loss"), &r->records()[2]);
    EXPECT_EQ(r->find("encoder.layers.0.norm", 0, Role::input, 2), &r->records()[0]);
    EXPECT_EQ(r->find("encoder.layers.0.norm"), nullptr);  // output role was never written
    EXPECT_EQ(r->find("nope"), nullptr);
  }
}

TEST(WriterReader, CountsOccurrencesPerIdentityAndKeepsExecutionOrder) {
  std::string path = dstest::scratch_path("occ");
  auto w = Writer::create(path, fixed());
  ASSERT_TRUE(w.ok());
  auto v = dstest::ramp(4);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*w)->write(dstest::f32_info("decoder.block", {4}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->write(dstest::f32_info("decoder.head", {4}), as_bytes(v)).ok());
  }
  ASSERT_TRUE((*w)->close().ok());
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records().size(), 6u);
  for (uint32_t k = 0; k < 3; ++k) {
    const Record* b = r->find("decoder.block", k);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->info.exec_index, 2u * k);
    EXPECT_EQ(r->find("decoder.head", k)->info.exec_index, 2u * k + 1);
  }
  EXPECT_EQ(r->find("decoder.block", 3), nullptr);
  EXPECT_TRUE(r->integrity().warnings.empty());
}

TEST(WriterReader, AppendContinuesNumberingAndTruncatesTornTail) {
  std::string path = dstest::scratch_path("append");
  auto v = dstest::ramp(16);
  {
    auto w = Writer::create(path, fixed());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->write(dstest::f32_info("a", {16}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->write(dstest::f32_info("b", {16}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  // Tear the file: drop END and half of INDEX, as if the process died during close.
  auto bytes = dstest::read_file(path);
  bytes.resize(bytes.size() - 64 - 10);
  dstest::write_file(path, bytes);
  {
    WriterOptions o = fixed(999);  // salt and metadata of the existing file win
    o.append = true;
    auto w = Writer::create(path, o);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_EQ((*w)->salt(), 0x0123456789abcdefull);
    auto r = (*w)->write(dstest::f32_info("a", {16}), as_bytes(v));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exec_index, 2u);
    EXPECT_EQ(r->occurrence, 1u);
    ASSERT_TRUE((*w)->close().ok());
  }
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::clean);
  EXPECT_TRUE(r->integrity().index_used);
  ASSERT_EQ(r->records().size(), 3u);
  EXPECT_EQ(r->find("a", 1)->info.exec_index, 2u);
}

TEST(WriterReader, AppendRefusesCorruptFile) {
  std::string path = dstest::scratch_path("append-corrupt");
  auto v = dstest::ramp(16);
  {
    auto w = Writer::create(path, fixed());
    ASSERT_TRUE((*w)->write(dstest::f32_info("a", {16}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->write(dstest::f32_info("b", {16}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  auto bytes = dstest::read_file(path);
  auto r0 = Reader::open(path);
  uint64_t payload = r0->records()[0].payload_offset;
  bytes[payload + 3] ^= std::byte{0x10};
  dstest::write_file(path, bytes);
  WriterOptions o;
  o.append = true;
  auto w = Writer::create(path, o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, Errc::bad_record_checksum);
  EXPECT_EQ(dstest::read_file(path), bytes);  // the damaged input was not modified
}

TEST(WriterReader, BackgroundQueueWritesTheSameBytesAsSynchronous) {
  std::string a = dstest::scratch_path("sync"), b = dstest::scratch_path("bg");
  for (const auto& [path, bg] : {std::pair{a, false}, std::pair{b, true}}) {
    WriterOptions o = fixed();
    o.background = bg;
    o.queue_bytes = 4096;  // small bound: the producer must block and resume
    auto w = Writer::create(path, o);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 50; ++i) {
      auto v = dstest::ramp(300 + static_cast<size_t>(i), 1.0f, static_cast<float>(i));
      ASSERT_TRUE((*w)->write(dstest::f32_info("layer." + std::to_string(i % 7), {300u + i}), as_bytes(v)).ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  EXPECT_EQ(dstest::read_file(a), dstest::read_file(b));
}

// The background queue stages payloads in one reused ring of queue_bytes: payloads that wrap
// around its end, one exactly its size, ones larger than it (written from the caller's buffer
// after the queue drains) and a flush in between must all give the synchronous writer's bytes,
// while the producer overwrites its one buffer as soon as write() returns.
TEST(WriterReader, BackgroundRingReusesItsBufferWithoutChangingBytes) {
  std::string a = dstest::scratch_path("ring-sync"), b = dstest::scratch_path("ring-bg");
  const size_t sizes[] = {100, 2000, 700, 2500, 3000, 1900, 40, 2600, 1200, 1200, 1200};
  for (const auto& [path, bg] : {std::pair{a, false}, std::pair{b, true}}) {
    WriterOptions o = fixed();
    o.background = bg;
    o.queue_bytes = 10000;  // 2500 floats
    auto w = Writer::create(path, o);
    ASSERT_TRUE(w.ok());
    std::vector<float> buf(3000);
    for (int round = 0; round < 6; ++round) {
      for (size_t k = 0; k < std::size(sizes); ++k) {
        const size_t n = sizes[(k + static_cast<size_t>(round)) % std::size(sizes)];
        for (size_t j = 0; j < n; ++j) buf[j] = static_cast<float>(round * 100000 + k * 1000 + j);
        std::span<const float> v(buf.data(), n);
        ASSERT_TRUE((*w)->write(dstest::f32_info("t" + std::to_string(k), {n}), as_bytes(v)).ok());
        std::fill(buf.begin(), buf.end(), -1.0f);  // the writer must have its own copy by now
      }
      if (round == 2) ASSERT_TRUE((*w)->flush().ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  auto bytes = dstest::read_file(a);
  EXPECT_EQ(dstest::read_file(b), bytes);
  auto r = Reader::open(b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::clean);
  ASSERT_EQ(r->records().size(), 66u);
  EXPECT_EQ(r->records()[4].info.shape[0], 3000u);  // an oversized record, in its place
}

TEST(WriterReader, ConcurrentWritersProduceAValidFile) {
  std::string path = dstest::scratch_path("threads");
  auto w = Writer::create(path, fixed());
  ASSERT_TRUE(w.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto v = dstest::ramp(100, 1.0f, static_cast<float>(t));
      for (int i = 0; i < 100; ++i) ASSERT_TRUE((*w)->write(dstest::f32_info("t" + std::to_string(t), {100}), as_bytes(v)).ok());
    });
  for (auto& th : threads) th.join();
  ASSERT_TRUE((*w)->close().ok());
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::clean);
  ASSERT_EQ(r->records().size(), 400u);
  for (size_t i = 0; i < 400; ++i) EXPECT_EQ(r->records()[i].info.exec_index, i);
  for (int t = 0; t < 4; ++t) EXPECT_NE(r->find("t" + std::to_string(t), 99), nullptr);
}

TEST(WriterReader, WriterRefusesWhatAReaderWouldRefuse) {
  std::string path = dstest::scratch_path("limits");
  auto w = Writer::create(path, fixed());
  ASSERT_TRUE(w.ok());
  auto v = dstest::ramp(4);
  auto bad = [&](TensorInfo t, std::span<const std::byte> p, Errc code) {
    auto r = (*w)->write(t, p);
    ASSERT_FALSE(r.ok()) << t.name;
    EXPECT_EQ(r.error().code, code) << r.error().to_string();
    EXPECT_FALSE(r.error().message.empty());
  };
  bad(dstest::f32_info("", {4}), as_bytes(v), Errc::empty_name);
  bad(dstest::f32_info(std::string(5000, 'x'), {4}), as_bytes(v), Errc::limit_exceeded);
  bad(dstest::f32_info("bad\xff", {4}), as_bytes(v), Errc::bad_utf8);
  bad(dstest::f32_info("rank", std::vector<uint64_t>(17, 1)), as_bytes(v), Errc::limit_exceeded);
  bad(dstest::f32_info("overflow", {1ull << 40, 1ull << 40}), as_bytes(v), Errc::shape_overflow);
  bad(dstest::f32_info("size", {5}), as_bytes(v), Errc::length_mismatch);
  TensorInfo axes = dstest::f32_info("axes", {4});
  axes.axes = {"a", "b"};
  bad(axes, as_bytes(v), Errc::bad_axes);
  TensorInfo q = dstest::f32_info("q", {4});
  q.encoding.kind = EncodingKind::affine_tensor;
  q.encoding.scales = {1.0};
  q.encoding.zero_points = {0};
  bad(q, as_bytes(v), Errc::bad_encoding);  // affine needs an integer dtype
  TensorInfo dup = dstest::f32_info("dup", {4});
  dup.attrs = {{"k", "1"}, {"k", "2"}};
  bad(dup, as_bytes(v), Errc::duplicate_key);
  // Past 16 keys the duplicate test is a set: a copy of an early key and of a late one.
  for (const char* copy : {"k03", "k25"}) {
    TensorInfo many = dstest::f32_info("many", {4});
    for (int i = 0; i < 30; ++i) many.attrs.emplace_back(fmt::format("k{:02}", i), "1");
    many.attrs.emplace_back(copy, "2");
    bad(many, as_bytes(v), Errc::duplicate_key);
  }
  ASSERT_TRUE((*w)->close().ok());
  auto again = (*w)->write(dstest::f32_info("late", {4}), as_bytes(v));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Errc::closed);
}

TEST(WriterReader, FilterAndBudgetSkipBytesButKeepNumbering) {
  std::string path = dstest::scratch_path("filter");
  WriterOptions o = fixed();
  o.filter = "encoder.layers.3* budget=2000";
  auto w = Writer::create(path, o);
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_TRUE((*w)->wants("encoder.layers.31.norm"));
  EXPECT_FALSE((*w)->wants("encoder.layers.4.norm"));
  auto v = dstest::ramp(100);  // 400 bytes each
  std::vector<WriteStatus> st;
  for (int layer = 0; layer < 40; ++layer) {
    auto r = (*w)->write(dstest::f32_info("encoder.layers." + std::to_string(layer) + ".norm", {100}), as_bytes(v));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exec_index, static_cast<uint64_t>(layer));
    st.push_back(r->status);
  }
  // Once over budget, even a tensor that would still fit is refused: the dump is a prefix.
  std::vector<float> one = {1.0f};
  auto tiny = (*w)->write(dstest::f32_info("encoder.layers.3.tiny", {1}), as_bytes(one));
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->status, WriteStatus::over_budget);
  ASSERT_TRUE((*w)->close().ok());
  EXPECT_EQ(st[3], WriteStatus::written);
  EXPECT_EQ(st[4], WriteStatus::filtered);
  EXPECT_EQ(st[30], WriteStatus::written);
  EXPECT_EQ(st[34], WriteStatus::over_budget);  // 3, 30, 31, 32, 33 = 2000 bytes
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records().size(), 5u);
  EXPECT_EQ(r->records()[1].info.exec_index, 30u);
  // The file holds only the selected tensors' bytes (plus framing), not the other 35 layers.
  EXPECT_LT(r->integrity().file_size, 5u * 640 + 1024);
}

TEST(WriterReader, IndexGivesLookupInLargeFiles) {
  std::string path = dstest::scratch_path("large");
  const int n = 100000;
  {
    auto w = Writer::create(path, fixed());
    ASSERT_TRUE(w.ok());
    std::vector<float> v = {1.0f};
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE((*w)->write(dstest::f32_info("m." + std::to_string(i % 50000), {1}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  OpenOptions oo;
  oo.verify = Verify::frames;
  auto r = Reader::open(path, oo);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->integrity().index_used);
  ASSERT_EQ(r->records().size(), static_cast<size_t>(n));
  for (int i = 0; i < n; i += 997) {
    const Record* rec = r->find("m." + std::to_string(i % 50000), static_cast<uint32_t>(i / 50000));
    ASSERT_NE(rec, nullptr);
    EXPECT_EQ(rec->info.exec_index, static_cast<uint64_t>(i));
  }
  // The index agrees with a full scan.
  OpenOptions scan;
  scan.use_index = false;
  auto s = Reader::open(path, scan);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->records().size(), r->records().size());
  for (size_t i = 0; i < s->records().size(); i += 101) EXPECT_EQ(s->records()[i].offset, r->records()[i].offset);
}

TEST(WriterReader, SummaryRecordsRoundTrip) {
  std::string path = dstest::scratch_path("summary");
  auto w = Writer::create(path, fixed());
  Summary s;
  s.stats.count = 6;
  s.stats.min = -1;
  s.stats.max = 2;
  s.stats.mean = 0.5;
  s.stats.std = 1;
  s.stats.l2_norm = 3;
  s.projection_seed = 42;
  s.projection = {1.5f, -2.5f, 0.0f};
  ASSERT_TRUE((*w)->write_summary(dstest::f32_info("big", {2, 3}), s).ok());
  ASSERT_TRUE((*w)->close().ok());
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records().size(), 1u);
  const Record& rec = r->records()[0];
  EXPECT_EQ(rec.kind, RecordKind::summary);
  ASSERT_NE(rec.summary(), nullptr);
  EXPECT_EQ(rec.summary()->projection, s.projection);
  EXPECT_EQ(rec.summary()->stats.l2_norm, 3.0);
  EXPECT_EQ(rec.info.shape, (std::vector<uint64_t>{2, 3}));
}

// §5: a writer refuses what a reader would refuse. A summary whose count is not its shape's
// element count, or whose NaN/Inf/zero counts exceed it, is bad_value in the reader (§3.6).
TEST(WriterReader, SummaryValuesAReaderWouldRefuseAreRefused) {
  std::string path = dstest::scratch_path("summary_bad");
  auto w = Writer::create(path, fixed());
  Summary s;
  s.stats.count = 5;  // shape {2, 3} has 6 elements
  auto r1 = (*w)->write_summary(dstest::f32_info("a", {2, 3}), s);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code, Errc::bad_value);
  EXPECT_NE(r1.error().message.find("summary counts 5 elements, its shape has 6"), std::string::npos);
  s.stats.count = 6;
  s.stats.nan_count = 4;
  s.stats.zero_count = 3;
  auto r2 = (*w)->write_summary(dstest::f32_info("b", {2, 3}), s);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code, Errc::bad_value);
  s.stats.nan_count = ~uint64_t{0};  // the sum overflows u64
  auto r3 = (*w)->write_summary(dstest::f32_info("c", {2, 3}), s);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code, Errc::bad_value);
  s.stats.nan_count = 3;
  ASSERT_TRUE((*w)->write_summary(dstest::f32_info("d", {2, 3}), s).ok());
  ASSERT_TRUE((*w)->close().ok());
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records().size(), 1u);
  EXPECT_EQ(r->records()[0].info.name, "d");
}

TEST(WriterReader, OverwriteKeepsExistingMappingsValid) {
  std::string path = dstest::scratch_path("overwrite");
  auto v = dstest::ramp(1000);
  {
    auto w = Writer::create(path, fixed());
    ASSERT_TRUE((*w)->write(dstest::f32_info("x", {1000}), as_bytes(v)).ok());
    ASSERT_TRUE((*w)->close().ok());
  }
  auto r = Reader::open(path);
  ASSERT_TRUE(r.ok());
  {
    auto w = Writer::create(path, fixed());  // replaces the file while it is mapped
    ASSERT_TRUE((*w)->close().ok());
  }
  float last;
  std::memcpy(&last, r->records()[0].payload.data() + 999 * 4, 4);  // no SIGBUS
  EXPECT_EQ(last, 999.0f);
}

namespace {

// Pages of `path` in the page cache (mincore over a read-only map).
size_t resident_bytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  struct stat st {};
  ::fstat(fd, &st);
  size_t size = static_cast<size_t>(st.st_size), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return 0;
  std::vector<unsigned char> v((size + page - 1) / page);
  size_t n = 0;
  if (::mincore(m, size, v.data()) == 0)
    for (unsigned char c : v) n += (c & 1) ? page : 0;
  ::munmap(m, size);
  return n;
}

// Writes 24 tensors of 2 MiB (48 MiB, twelve drop-behind windows), the last half of them by an
// append when `append`.
void write_large(const std::string& path, bool drop_behind, bool background, bool append) {
  auto v = dstest::ramp(512 * 1024, 0.5f);
  const int parts = append ? 2 : 1, per_part = 24 / parts;
  for (int part = 0; part < parts; ++part) {
    WriterOptions o = fixed();
    o.drop_behind = drop_behind;
    o.background = background;
    o.queue_bytes = 4u << 20;
    o.append = part == 1;
    auto w = Writer::create(path, o);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < per_part; ++i) {
      v[0] = static_cast<float>(part * per_part + i);
      ASSERT_TRUE((*w)->write(dstest::f32_info("layer." + std::to_string(i), {512 * 1024}), as_bytes(v)).ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
}

}  // namespace

TEST(WriterReader, DropBehindWritesTheSameBytesAndLeavesLittleCached) {
  std::string keep = dstest::scratch_path("keep"), drop = dstest::scratch_path("drop"),
              keep_append = dstest::scratch_path("keep-append"),
              drop_append_bg = dstest::scratch_path("drop-append-bg");
  write_large(drop, true, false, false);
  write_large(keep, false, false, false);
  write_large(drop_append_bg, true, true, true);
  write_large(keep_append, false, false, true);
  // Residency (before anything reads the file back), where the file system evicts clean pages at
  // all (tmpfs never does): the kept file is evictable once synced, and the drop-behind file keeps
  // about its last 20 MiB of 48.
  size_t resident_drop = resident_bytes(drop);
  int fd = ::open(keep.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (resident_bytes(keep) < (8u << 20)) EXPECT_LE(resident_drop, 26u << 20);
  auto bytes = dstest::read_file(keep);
  ASSERT_GT(bytes.size(), 48u << 20);
  EXPECT_EQ(dstest::read_file(drop), bytes);
  EXPECT_EQ(dstest::read_file(drop_append_bg), dstest::read_file(keep_append));
  for (const auto& p : {keep, drop, keep_append, drop_append_bg}) std::remove(p.c_str());
}
