// The footer index (docs/format.md §3.4, §3.5) is judged once, by the reader, whatever options a
// tool opens the file with: crafted slot tables must never crash a lookup (issue 7 bug 1), every
// unsound index is bad_index with the offset of the failing field (bugs 11, 12), and private
// SKIPPABLE records are not indexed (bug 10). Also the header check order of §2.1 and the shape
// rule of §3.3 for zero-element shapes (bugs 9, 12).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "format/codec.hpp"
#include "format/index.hpp"
#include "test_util.hpp"

using namespace driftscope;
using namespace driftscope::detail;

namespace {

constexpr uint64_t kIndexSalt = 0x0102030405060708ull;

std::vector<std::byte> clean_file(int tensors = 3) {
  std::string path = dstest::scratch_path("index-base");
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = kIndexSalt;
  auto w = Writer::create(path, o);
  auto v = dstest::ramp(4);
  for (int i = 0; i < tensors; ++i)
    (void)(*w)->write(dstest::f32_info("layer." + std::to_string(i), {4}), dstest::as_bytes(v));
  (void)(*w)->close();
  return dstest::read_file(path);
}

struct Footer {
  uint64_t index, end, meta, entries, slots, n, m;
};

Footer footer(const std::vector<std::byte>& f) {
  Footer x{};
  x.end = f.size() - 64;
  x.index = load_le<uint64_t>(f.data() + x.end + kFrameSize);
  x.meta = x.index + kFrameSize;
  x.n = load_le<uint64_t>(f.data() + x.meta);
  x.m = load_le<uint64_t>(f.data() + x.meta + 8);
  x.entries = x.index + payload_start(kIndexMetaSize);
  x.slots = x.entries + x.n * kIndexEntrySize;
  return x;
}

struct Verdict {
  FileState state;
  Errc code;
  uint64_t offset;
  bool index_used;
};

// Opens in every mode a tool uses and insists that the verdict is the same in all of them.
Verdict judge(const std::vector<std::byte>& f) {
  std::optional<Verdict> first;
  for (bool use_index : {true, false}) {
    for (Verify v : {Verify::full, Verify::frames}) {
      auto r = Reader::from_memory(f, {v, use_index, false});
      EXPECT_TRUE(r.ok()) << r.error().to_string();
      if (!r.ok()) return {FileState::corrupt, r.error().code, r.error().offset, false};
      const Integrity& in = r->integrity();
      Verdict got{in.state, in.corruption ? in.corruption->code : Errc::ok,
                  in.corruption ? in.corruption->offset : kNoOffset, in.index_used};
      // Every lookup works, through the index or by scanning, and never crashes.
      for (const Record& rec : r->records()) {
        const Record* hit = r->find(rec.info.name, rec.info.occurrence, rec.info.role, rec.info.role_index);
        EXPECT_NE(hit, nullptr) << rec.info.name;
      }
      EXPECT_EQ(r->find("no.such.tensor"), nullptr);
      if (!first) {
        first = got;
      } else {
        EXPECT_EQ(got.state, first->state) << "use_index " << use_index;
        EXPECT_EQ(got.code, first->code) << "use_index " << use_index;
        EXPECT_EQ(got.offset, first->offset) << "use_index " << use_index;
      }
      if (use_index) first->index_used = got.index_used;
    }
  }
  return *first;
}

void set_slot(std::vector<std::byte>& f, uint64_t s, uint32_t v) {
  Footer x = footer(f);
  store_le<uint32_t>(f.data() + x.slots + 4 * s, v);
  dstest::refresh_record_crcs(f, x.index);
}

TEST(Index, CleanFileUsesTheIndex) {
  auto f = clean_file();
  Verdict v = judge(f);
  EXPECT_EQ(v.state, FileState::clean);
  EXPECT_TRUE(v.index_used);
}

// Bug 1: slot values past the entry count crashed the probe (heap-buffer-overflow / SIGSEGV).
TEST(Index, SlotsPastTheEntryCountAreBadIndexNotACrash) {
  auto f = clean_file();
  Footer x = footer(f);
  for (uint64_t s = 0; s < x.m; ++s) set_slot(f, s, 0xFFFFFFFFu);
  Verdict v = judge(f);
  EXPECT_EQ(v.state, FileState::corrupt);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.slots);  // the first slot differs from the table linear probing builds
  EXPECT_FALSE(v.index_used);
}

TEST(Index, OneSlotPastTheEntryCount) {
  auto f = clean_file();
  Footer x = footer(f);
  uint64_t s = 0;
  while (load_le<uint32_t>(f.data() + x.slots + 4 * s) == 0) ++s;
  set_slot(f, s, static_cast<uint32_t>(x.n + 7));
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.slots + 4 * s);
}

// Bug 1 / 11: a slot table that points at the wrong entries was "clean" for verify and info.
TEST(Index, SwappedAndDuplicatedSlotsAreBadIndex) {
  for (bool duplicate : {false, true}) {
    auto f = clean_file();
    Footer x = footer(f);
    std::vector<uint64_t> used;
    for (uint64_t s = 0; s < x.m; ++s)
      if (load_le<uint32_t>(f.data() + x.slots + 4 * s) != 0) used.push_back(s);
    ASSERT_GE(used.size(), 2u);
    uint32_t a = load_le<uint32_t>(f.data() + x.slots + 4 * used[0]);
    uint32_t b = load_le<uint32_t>(f.data() + x.slots + 4 * used[1]);
    set_slot(f, used[0], b);
    if (!duplicate) set_slot(f, used[1], a);
    Verdict v = judge(f);
    EXPECT_EQ(v.state, FileState::corrupt) << duplicate;
    EXPECT_EQ(v.code, Errc::bad_index) << duplicate;
    EXPECT_EQ(v.offset, x.slots + 4 * used[0]) << duplicate;
  }
}

TEST(Index, EntryThatNamesANonexistentRecord) {
  auto f = clean_file();
  Footer x = footer(f);
  store_le<uint64_t>(f.data() + x.entries + kIndexEntrySize, 0xDEAD00);  // entry 1 offset
  dstest::refresh_record_crcs(f, x.index);
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.entries + kIndexEntrySize);
}

TEST(Index, WrongNameHashIsReportedAtTheField) {
  auto f = clean_file();
  Footer x = footer(f);
  f[x.entries + 8] ^= std::byte{1};
  dstest::refresh_record_crcs(f, x.index);
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.entries + 8);
}

// The INDEX record's own checksum gives the same verdict whether payload checksums are checked
// at open (Verify::full) or deferred (Verify::frames): only TENSOR/SUMMARY CRCs are deferred.
TEST(Index, IndexRecordChecksumInEveryMode) {
  auto f = clean_file();
  Footer x = footer(f);
  f[x.index + frm::record_crc] ^= std::byte{1};
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_record_checksum);
  EXPECT_EQ(v.offset, x.index + frm::record_crc);
}

// Bug 11: a slot_count that is a power of two but not the smallest one.
TEST(Index, SlotCountMustBeMinimal) {
  auto f = clean_file();
  Footer x = footer(f);
  // Rebuild the INDEX with twice the slots (a table that would probe correctly).
  std::vector<IndexEntry> entries;
  for (uint64_t i = 0; i < x.n; ++i) {
    const std::byte* e = f.data() + x.entries + i * kIndexEntrySize;
    entries.push_back({load_le<uint64_t>(e), load_le<uint64_t>(e + 8), load_le<uint32_t>(e + 16), load_le<uint32_t>(e + 20)});
  }
  std::string meta = encode_index_meta(x.n, 2 * x.m);
  std::string payload = encode_index_payload(entries, 2 * x.m);
  std::vector<std::byte> g(f.begin(), f.begin() + static_cast<ptrdiff_t>(x.index));
  uint64_t len = record_length_for(meta.size(), payload.size());
  g.resize(x.index + len);
  Frame fr;
  fr.kind = kKindIndex;
  fr.record_length = len;
  fr.payload_length = payload.size();
  fr.meta_length = static_cast<uint32_t>(meta.size());
  fr.salt = kIndexSalt;
  std::memcpy(g.data() + x.index + kFrameSize, meta.data(), meta.size());
  std::memcpy(g.data() + x.index + payload_start(meta.size()), payload.data(), payload.size());
  store_frame(fr, g.data() + x.index);
  dstest::refresh_record_crcs(g, x.index);
  uint64_t end = g.size();
  g.insert(g.end(), f.end() - 64, f.end());
  store_le<uint64_t>(g.data() + end + kFrameSize, x.index);
  dstest::refresh_record_crcs(g, end);
  Verdict v = judge(g);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.meta + 8);
}

// Bug 12: a wrong hash id is bad_index at the hash field; a non-zero reserved field is
// reserved_nonzero at its first non-zero byte, not a message about the hash.
TEST(Index, HashIdAndReservedField) {
  auto f = clean_file();
  Footer x = footer(f);
  store_le<uint32_t>(f.data() + x.meta + 16, 2);
  dstest::refresh_record_crcs(f, x.index);
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.meta + 16);

  auto g = clean_file();
  g[x.meta + 22] = std::byte{0x10};
  dstest::refresh_record_crcs(g, x.index);
  v = judge(g);
  EXPECT_EQ(v.code, Errc::reserved_nonzero);
  EXPECT_EQ(v.offset, x.meta + 22);
}

// Bug 11: END's record_count and index_offset are checked field by field.
TEST(Index, EndCountAndOffset) {
  auto f = clean_file();
  Footer x = footer(f);
  store_le<uint64_t>(f.data() + x.end + kFrameSize + 8, x.n + 1);
  dstest::refresh_record_crcs(f, x.end);
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.end + kFrameSize + 8);

  // Index missing: END directly after the records.
  auto g = clean_file();
  std::vector<std::byte> h(g.begin(), g.begin() + static_cast<ptrdiff_t>(x.index));
  h.insert(h.end(), g.end() - 64, g.end());
  dstest::refresh_record_crcs(h, x.index);
  v = judge(h);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.index + kFrameSize);  // END's index_offset field
}

std::vector<std::byte> private_record(uint16_t kind = 0x8001, uint16_t flags = kFlagSkippable) {
  std::string meta = "vendor";
  std::string payload(10, 'p');
  uint64_t len = record_length_for(meta.size(), payload.size());
  std::vector<std::byte> r(len);
  Frame fr;
  fr.kind = kind;
  fr.flags = flags;
  fr.record_length = len;
  fr.payload_length = payload.size();
  fr.meta_length = static_cast<uint32_t>(meta.size());
  fr.salt = kIndexSalt;
  std::memcpy(r.data() + kFrameSize, meta.data(), meta.size());
  std::memcpy(r.data() + payload_start(meta.size()), payload.data(), payload.size());
  store_frame(fr, r.data());
  dstest::refresh_record_crcs(r, 0);
  return r;
}

// Bug 10: a valid file with a private SKIPPABLE record between its tensors (§3.2) and a footer
// index of the TENSOR records is clean, and lookups use the index.
TEST(Index, PrivateSkippableRecordsAreNotIndexed) {
  std::string path = dstest::scratch_path("index-private");
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = kIndexSalt;
  auto v4 = dstest::ramp(4);
  {
    auto w = Writer::create(path, o);
    (void)(*w)->write(dstest::f32_info("a", {4}), dstest::as_bytes(v4));
    (void)(*w)->close();
  }
  // Splice a private record after "a", then append "b" (§5 Append keeps it) and close.
  auto f = dstest::read_file(path);
  Footer x = footer(f);
  f.resize(x.index);
  auto p = private_record();
  f.insert(f.end(), p.begin(), p.end());
  dstest::write_file(path, f);
  o.append = true;
  {
    auto w = Writer::create(path, o);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    (void)(*w)->write(dstest::f32_info("b", {4}), dstest::as_bytes(v4));
    ASSERT_TRUE((*w)->close().ok());
  }
  f = dstest::read_file(path);
  Verdict v = judge(f);
  EXPECT_EQ(v.state, FileState::clean);
  EXPECT_EQ(v.code, Errc::ok);
  EXPECT_TRUE(v.index_used);
}

// Only END may follow INDEX (§3.5): a private record between them is bad_index.
TEST(Index, RecordBetweenIndexAndEnd) {
  auto f = clean_file();
  Footer x = footer(f);
  std::vector<std::byte> end(f.end() - 64, f.end());
  f.resize(x.end);
  auto p = private_record();
  f.insert(f.end(), p.begin(), p.end());
  f.insert(f.end(), end.begin(), end.end());
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::bad_index);
  EXPECT_EQ(v.offset, x.end);
}

// §3.2 settled: kinds 1-4 never carry SKIPPABLE; the bit is reserved for them.
TEST(Index, SkippableFlagOnAKnownKind) {
  auto f = clean_file();
  uint64_t h = load_le<uint32_t>(f.data() + hdr::header_length);
  store_le<uint16_t>(f.data() + h + frm::flags, kFlagSkippable);
  dstest::refresh_record_crcs(f, h);
  Verdict v = judge(f);
  EXPECT_EQ(v.code, Errc::reserved_nonzero);
  EXPECT_EQ(v.offset, h + frm::flags);
}

// ---- header order (§2.1) ----------------------------------------------------------------------

Error header_error(const std::vector<std::byte>& f) {
  auto r = Reader::from_memory(f);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Error{} : r.error();
}

// Bug 12: header_length over 1 MiB is limit_exceeded, checked before its relation.
TEST(Header, LengthOverTheLimitIsLimitExceeded) {
  auto f = clean_file();
  store_le<uint32_t>(f.data() + hdr::header_length, (1u << 20) + 64);
  dstest::refresh_header_crc(f);
  Error e = header_error(f);
  EXPECT_EQ(e.code, Errc::limit_exceeded);
  EXPECT_EQ(e.offset, hdr::header_length);
}

// Bug 12: truncated_header is reported at the file size for any file shorter than 64 bytes.
TEST(Header, ShortFileIsTruncatedAtItsSize) {
  auto f = clean_file();
  for (size_t n : {0u, 1u, 40u, 63u, 100u}) {
    std::vector<std::byte> g(f.begin(), f.begin() + static_cast<ptrdiff_t>(n));
    Error e = header_error(g);
    EXPECT_EQ(e.code, Errc::truncated_header) << n;
    EXPECT_EQ(e.offset, n) << n;
  }
}

// §2.1 order: version_major before byte_order; metadata_count before reserved bytes; reserved
// bytes before the length relation is not the order (the relation comes first).
TEST(Header, CheckOrder) {
  auto f = clean_file();
  store_le<uint16_t>(f.data() + hdr::version_major, 2);
  store_le<uint32_t>(f.data() + hdr::byte_order, 0x04030201);
  Error e = header_error(f);
  EXPECT_EQ(e.code, Errc::unsupported_version);

  auto g = clean_file();
  store_le<uint32_t>(g.data() + hdr::metadata_count, 5000);
  g[hdr::reserved + 3] = std::byte{1};
  dstest::refresh_header_crc(g);
  e = header_error(g);
  EXPECT_EQ(e.code, Errc::limit_exceeded);
  EXPECT_EQ(e.offset, hdr::metadata_count);

  auto h = clean_file();
  h[hdr::reserved + 3] = std::byte{1};
  store_le<uint32_t>(h.data() + hdr::header_length, 4096);
  dstest::refresh_header_crc(h);
  e = header_error(h);
  EXPECT_EQ(e.code, Errc::length_mismatch);
  EXPECT_EQ(e.offset, hdr::header_length);
}

// ---- the shape rule (§3.3), bug 9 -------------------------------------------------------------

Result<uint64_t> shape_size(std::vector<uint64_t> shape, DType dt = DType::f32) {
  TensorInfo t = dstest::f32_info("t", std::move(shape));
  t.dtype = dt;
  return tensor_payload_size(t);
}

TEST(ShapeRule, ZeroDimsAreSkippedInEveryPosition) {
  const uint64_t g40 = uint64_t{1} << 40, g63 = uint64_t{1} << 63;
  for (auto s : std::vector<std::vector<uint64_t>>{{g40, g40, 0}, {0, g40, g40}, {g40, 0, g40}}) {
    auto r = shape_size(s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::shape_overflow);
  }
  auto r = shape_size({g63, g63, 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::shape_overflow);
  // Fits in 64 bits but spans more than the 2^48 payload limit.
  r = shape_size({0, uint64_t{1} << 47}, DType::f32);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::limit_exceeded);
  r = shape_size({g40, 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
  r = shape_size({3, 5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 60u);
}

}  // namespace
