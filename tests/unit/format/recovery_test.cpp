// Crash safety (docs/format.md §4): a file cut at any byte returns exactly the complete records
// before the cut; single-bit flips anywhere are detected; a writer killed with SIGKILL loses
// nothing it reported durable.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "test_util.hpp"

using namespace driftscope;
using dstest::as_bytes;

namespace {

struct Sample {
  std::vector<std::byte> bytes;
  std::vector<uint64_t> record_ends;  // end offset of each TENSOR record
  uint64_t header_length = 0;
};

Sample sample_file() {
  std::string path = dstest::scratch_path("recovery");
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = 42;
  o.metadata = {{"framework", "recovery-test"}};
  auto w = Writer::create(path, o);
  // Sizes chosen so records span several 64-byte blocks and some payloads are not multiples of 64.
  const size_t sizes[] = {1, 17, 100, 3, 64};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    auto v = dstest::ramp(sizes[i], 0.25f, static_cast<float>(i));
    TensorInfo t = dstest::f32_info("block." + std::to_string(i), {sizes[i]});
    t.attrs = {{"i", std::to_string(i)}};
    (void)(*w)->write(t, as_bytes(v));
  }
  (void)(*w)->close();
  Sample s;
  s.bytes = dstest::read_file(path);
  auto r = Reader::open(path);
  s.header_length = r->header().header_length;
  for (const Record& rec : r->records()) s.record_ends.push_back(rec.offset + rec.size);
  return s;
}

}  // namespace

TEST(Recovery, TruncationAtEveryByteKeepsExactlyTheCompleteRecords) {
  Sample s = sample_file();
  const uint64_t data_end = s.record_ends.back();
  for (uint64_t cut = 0; cut <= s.bytes.size(); ++cut) {
    std::span<const std::byte> part(s.bytes.data(), cut);
    for (Verify verify : {Verify::full, Verify::frames}) {
      for (bool use_index : {true, false}) {
        auto r = Reader::from_memory(part, {verify, use_index, false});
        if (cut < s.header_length) {
          ASSERT_FALSE(r.ok()) << "cut " << cut;
          EXPECT_EQ(r.error().code, Errc::truncated_header);
          continue;
        }
        ASSERT_TRUE(r.ok()) << "cut " << cut << ": " << r.error().to_string();
        size_t complete = 0;
        while (complete < s.record_ends.size() && s.record_ends[complete] <= cut) ++complete;
        const Integrity& in = r->integrity();
        ASSERT_EQ(r->records().size(), complete) << "cut " << cut;
        ASSERT_FALSE(in.corruption.has_value()) << "cut " << cut << ": " << in.corruption->to_string();
        bool at_boundary = cut == s.header_length || (complete && s.record_ends[complete - 1] == cut) ||
                           (cut > data_end && cut == s.bytes.size() - 64);  // INDEX complete, END missing
        if (cut == s.bytes.size()) {
          EXPECT_EQ(in.state, FileState::clean);
        } else if (at_boundary) {
          EXPECT_EQ(in.state, FileState::unfinished) << "cut " << cut;
        } else {
          EXPECT_EQ(in.state, FileState::cut) << "cut " << cut;
          EXPECT_EQ(in.cut_offset + in.discarded_bytes, cut);
          EXPECT_GE(in.cut_offset, complete ? s.record_ends[complete - 1] : s.header_length);
        }
        for (size_t i = 0; i < complete; ++i) ASSERT_EQ(r->records()[i].info.name, "block." + std::to_string(i));
      }
    }
  }
}

TEST(Recovery, EverySingleBitFlipIsDetected) {
  Sample s = sample_file();
  // Every byte of the file is covered by a checksum or a must-be-zero rule.
  for (size_t byte = 0; byte < s.bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; bit += (byte < 256 ? 1 : 3)) {
      auto f = s.bytes;
      f[byte] ^= std::byte(1u << bit);
      for (bool use_index : {true, false}) {
        auto r = Reader::from_memory(f, {Verify::full, use_index, false});
        if (!r.ok()) continue;  // header damage: rejected
        const Integrity& in = r->integrity();
        ASSERT_TRUE(in.state == FileState::corrupt || in.state == FileState::cut)
            << "flip of bit " << bit << " at byte " << byte << " went unnoticed (state "
            << file_state_name(in.state) << ")";
        ASSERT_LE(r->records().size(), s.record_ends.size());
      }
    }
  }
}

TEST(Recovery, KilledWriterLosesNothingItReportedDurable) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 6; ++round) {
    std::string path = dstest::scratch_path("kill-" + std::to_string(round));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      WriterOptions o;
      o.sync = SyncPolicy::every_record;
      auto w = Writer::create(path, o);
      if (!w.ok()) ::_exit(3);
      for (uint32_t i = 0;; ++i) {
        std::vector<float> v(1000 + (i % 7) * 300, static_cast<float>(i));
        if (!(*w)->write(dstest::f32_info("op." + std::to_string(i), {v.size()}), as_bytes(v)).ok()) ::_exit(4);
        // write() returned with sync every_record: record i is durable. Tell the parent.
        if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(5);
      }
    }
    ::close(fds[1]);
    // The random delay starts at the child's first durable record: on a loaded machine the
    // child had sometimes not yet created the file when the shortest delay ran out, and a kill
    // before anything is written tests nothing (and leaves no file to open).
    int64_t durable = -1;
    uint32_t i;
    ASSERT_EQ(::read(fds[0], &i, sizeof i), static_cast<ssize_t>(sizeof i)) << "the writer reported no record";
    durable = i;
    std::uniform_int_distribution<int> delay(2000, 60000);
    ::usleep(static_cast<useconds_t>(delay(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    while (::read(fds[0], &i, sizeof i) == sizeof i) durable = i;
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited by itself: " << status;
    auto r = Reader::open(path);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    const Integrity& in = r->integrity();
    EXPECT_NE(in.state, FileState::corrupt);
    EXPECT_NE(in.state, FileState::clean);
    ASSERT_GE(static_cast<int64_t>(r->records().size()), durable + 1) << "round " << round;
    for (const Record& rec : r->records()) {
      uint32_t k = static_cast<uint32_t>(rec.info.exec_index);
      ASSERT_EQ(rec.info.name, "op." + std::to_string(k));
      ASSERT_EQ(rec.payload.size(), (1000 + (k % 7) * 300) * 4u);
      float first, last;
      std::memcpy(&first, rec.payload.data(), 4);
      std::memcpy(&last, rec.payload.data() + rec.payload.size() - 4, 4);
      ASSERT_EQ(first, static_cast<float>(k));
      ASSERT_EQ(last, static_cast<float>(k));
    }
  }
}
