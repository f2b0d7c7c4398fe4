// Invalid files built from an enum of corruptions grouped by file section (llama.cpp
// test-gguf style): each must be rejected with its exact error code, never crash.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "format/codec.hpp"
#include "test_util.hpp"

using namespace driftscope;
using namespace driftscope::detail;

namespace {

constexpr uint64_t kSalt = 0x1122334455667788ull;

// A valid base file: header with metadata, three tensors, INDEX, END.
std::vector<std::byte> base_file(bool close = true) {
  std::string path = dstest::scratch_path("corrupt-base");
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = kSalt;
  o.metadata = {{"framework", "test"}};
  auto w = Writer::create(path, o);
  auto v = dstest::ramp(10);
  for (int i = 0; i < 3; ++i) {
    TensorInfo t = dstest::f32_info("layer." + std::to_string(i), {2, 5});
    t.axes = {"seq", "hidden"};
    (void)(*w)->write(t, dstest::as_bytes(v));
  }
  (void)(*w)->close();
  auto f = dstest::read_file(path);
  if (!close) {
    // What a crashed writer leaves: the records without INDEX and END.
    uint64_t index_offset = load_le<uint64_t>(f.data() + f.size() - 64 + kFrameSize);
    f.resize(index_offset);
  }
  return f;
}

uint64_t header_length(const std::vector<std::byte>& f) { return load_le<uint32_t>(f.data() + hdr::header_length); }
uint64_t record_length_at(const std::vector<std::byte>& f, uint64_t pos) {
  return load_le<uint64_t>(f.data() + pos + frm::record_length);
}

struct Outcome {
  bool opened;
  Errc code;       // open error, or integrity corruption code
  FileState state;
  size_t records;
};

Outcome open_bytes(const std::vector<std::byte>& f, bool use_index = false) {
  OpenOptions o;
  o.use_index = use_index;
  auto r = Reader::from_memory(f, o);
  if (!r) return {false, r.error().code, FileState::corrupt, 0};
  const auto& in = r->integrity();
  return {true, in.corruption ? in.corruption->code : Errc::ok, in.state, r->records().size()};
}

// Overwrites a TENSOR meta field of the first record and fixes the CRCs so that exactly the
// field check fires.
template <class T>
std::vector<std::byte> with_meta_field(size_t field_offset, T value) {
  auto f = base_file();
  uint64_t pos = header_length(f);
  store_le<T>(f.data() + pos + kFrameSize + field_offset, value);
  dstest::refresh_record_crcs(f, pos);
  return f;
}

// Replaces the first record by one with the given raw meta (valid frame and CRCs).
std::vector<std::byte> with_first_meta(const std::string& meta, std::span<const std::byte> payload) {
  auto f = base_file();
  uint64_t pos = header_length(f);
  uint64_t len = record_length_at(f, pos);
  auto rec = dstest::raw_record(kKindTensor, 0, meta, payload, kSalt);
  std::vector<std::byte> out(f.begin(), f.begin() + static_cast<long>(pos));
  out.insert(out.end(), rec.begin(), rec.end());
  out.insert(out.end(), f.begin() + static_cast<long>(pos + len), f.end());
  return out;
}

std::string meta_of(const TensorInfo& t) {
  auto m = encode_tensor_meta(t);
  EXPECT_TRUE(m.ok());
  return *m;
}

enum class Corruption {
  // header (§2.1)
  short_file, bad_magic, future_major, bad_byte_order, unknown_required_feature, reserved_header,
  header_length_mismatch, bad_header_crc, metadata_count_over_limit, duplicate_metadata_key, metadata_bad_utf8,
  // record frame (§3.1)
  bad_record_magic, bad_frame_crc, spliced_record, record_length_inconsistent, payload_length_over_limit,
  frame_reserved, frame_reserved_flags, unknown_kind, bad_record_crc, nonzero_meta_padding, nonzero_payload_padding,
  // tensor meta (§3.3)
  bad_dtype, rank_over_limit, bad_role, bad_encoding_enum, meta_reserved, empty_name, name_over_limit,
  name_bad_utf8, shape_overflow, payload_size_mismatch, axes_count, meta_trailing_bytes, meta_too_short,
  duplicate_attribute, duplicate_attribute_early, duplicate_attribute_late, affine_on_float, nonfinite_scale, bool_value,
  // tail (§3.4, §3.5)
  record_after_end, end_points_elsewhere,
};

struct Case {
  Corruption c;
  const char* name;
  Errc expect;
  bool open_fails;  // header damage: nothing can be read
};

std::vector<std::byte> make(Corruption c) {
  auto f = base_file();
  const uint64_t h = header_length(f);
  auto hdr_u32 = [&](size_t off, uint32_t v) {
    store_le<uint32_t>(f.data() + off, v);
    dstest::refresh_header_crc(f);
  };
  auto frame_edit = [&](size_t off, auto v) {
    store_le<decltype(v)>(f.data() + h + off, v);
    dstest::refresh_record_crcs(f, h);
  };
  std::vector<float> ten(10, 1.0f);
  auto ten_bytes = dstest::as_bytes(ten);
  TensorInfo t = dstest::f32_info("layer.0", {2, 5});
  switch (c) {
    case Corruption::short_file: f.resize(40); return f;
    case Corruption::bad_magic: f[1] = std::byte{'X'}; return f;
    case Corruption::future_major: store_le<uint16_t>(f.data() + hdr::version_major, 2); dstest::refresh_header_crc(f); return f;
    case Corruption::bad_byte_order: hdr_u32(hdr::byte_order, 0x04030201); return f;
    case Corruption::unknown_required_feature: hdr_u32(hdr::required, 0x8); return f;
    case Corruption::reserved_header: f[hdr::reserved + 3] = std::byte{1}; dstest::refresh_header_crc(f); return f;
    case Corruption::header_length_mismatch: hdr_u32(hdr::header_length, static_cast<uint32_t>(h + 64)); return f;
    case Corruption::bad_header_crc: f[hdr::salt] ^= std::byte{1}; return f;
    case Corruption::metadata_count_over_limit: hdr_u32(hdr::metadata_count, 5000); return f;
    case Corruption::duplicate_metadata_key: {
      // Two entries with the same key "k", built by hand (a writer refuses to make them).
      std::string meta;
      put_le<uint32_t>(meta, 1); meta += "k"; put_le<uint32_t>(meta, 1); meta += "1";
      put_le<uint32_t>(meta, 1); meta += "k"; put_le<uint32_t>(meta, 1); meta += "2";
      std::vector<std::byte> g(64 + 64);
      std::memcpy(g.data(), f.data(), 64);
      std::memcpy(g.data() + 64, meta.data(), meta.size());
      store_le<uint32_t>(g.data() + hdr::header_length, 128);
      store_le<uint32_t>(g.data() + hdr::metadata_length, static_cast<uint32_t>(meta.size()));
      store_le<uint32_t>(g.data() + hdr::metadata_count, 2);
      dstest::refresh_header_crc(g);
      return g;
    }
    case Corruption::metadata_bad_utf8: {
      // the first metadata key is "framework": make its first byte 0xC0 (overlong lead byte)
      f[64 + 4] = std::byte{0xC0};
      dstest::refresh_header_crc(f);
      return f;
    }
    case Corruption::bad_record_magic: f[h + 1] = std::byte{'X'}; return f;
    case Corruption::bad_frame_crc: f[h + frm::frame_crc] ^= std::byte{1}; return f;
    case Corruption::spliced_record: {
      // the same record, but from a file with another salt
      auto rec = dstest::raw_record(kKindTensor, 0, meta_of(t), ten_bytes, kSalt ^ 1);
      std::copy(rec.begin(), rec.end(), f.begin() + static_cast<long>(h));
      return f;
    }
    case Corruption::record_length_inconsistent: frame_edit(frm::record_length, record_length_at(f, h) + 64); return f;
    case Corruption::payload_length_over_limit: frame_edit(frm::payload_length, uint64_t{1} << 60); return f;
    case Corruption::frame_reserved: frame_edit(frm::reserved, uint32_t{7}); return f;
    case Corruption::frame_reserved_flags: frame_edit(frm::flags, uint16_t{0x4}); return f;
    case Corruption::unknown_kind: frame_edit(frm::kind, uint16_t{99}); return f;
    case Corruption::bad_record_crc: f[h + kFrameSize + 2] ^= std::byte{1}; return f;
    case Corruption::nonzero_meta_padding: {
      uint32_t ml = load_le<uint32_t>(f.data() + h + frm::meta_length);
      f[h + kFrameSize + ml] = std::byte{1};
      return f;
    }
    case Corruption::nonzero_payload_padding: {
      uint32_t ml = load_le<uint32_t>(f.data() + h + frm::meta_length);
      f[h + payload_start(ml) + 40] = std::byte{1};  // the payload is 40 bytes
      return f;
    }
    case Corruption::bad_dtype: return with_meta_field<uint16_t>(12, 200);
    case Corruption::rank_over_limit: return with_meta_field<uint8_t>(14, 40);
    case Corruption::bad_role: return with_meta_field<uint8_t>(15, 9);
    case Corruption::bad_encoding_enum: return with_meta_field<uint8_t>(18, 5);
    case Corruption::meta_reserved: return with_meta_field<uint32_t>(20, 1);
    case Corruption::empty_name: return with_meta_field<uint16_t>(24, 0);
    case Corruption::name_over_limit: return with_meta_field<uint16_t>(24, 5000);
    case Corruption::name_bad_utf8: {
      // "layer.0" starts after the 2 dims: make it "\xED\xA0\x80er.0" (a UTF-16 surrogate)
      auto g = base_file();
      uint64_t m = h + kFrameSize + kTensorMetaFixedSize + 16;
      g[m] = std::byte{0xED}; g[m + 1] = std::byte{0xA0}; g[m + 2] = std::byte{0x80};
      dstest::refresh_record_crcs(g, h);
      return g;
    }
    case Corruption::shape_overflow: {
      auto g = base_file();
      store_le<uint64_t>(g.data() + h + kFrameSize + 32, uint64_t{1} << 62);
      store_le<uint64_t>(g.data() + h + kFrameSize + 40, uint64_t{1} << 62);
      dstest::refresh_record_crcs(g, h);
      return g;
    }
    case Corruption::payload_size_mismatch: {
      TensorInfo u = t;
      u.shape = {3, 5};  // 60 bytes expected, 40 present
      return with_first_meta(meta_of(u), ten_bytes);
    }
    case Corruption::axes_count: {
      TensorInfo u = t;
      std::string m = meta_of(u);
      // rank 2 with one axis name: splice "seq" in as the axes string
      std::string meta;
      meta = m.substr(0, 28);
      put_le<uint16_t>(meta, 3);  // axes_length
      meta += m.substr(30, 2);    // attr_count
      meta += m.substr(32);       // dims, name, op_type
      meta += "seq";
      return with_first_meta(meta, ten_bytes);
    }
    case Corruption::meta_trailing_bytes: return with_first_meta(meta_of(t) + std::string(3, 'z'), ten_bytes);
    case Corruption::meta_too_short: return with_first_meta(meta_of(t).substr(0, 20), ten_bytes);
    case Corruption::duplicate_attribute: {
      TensorInfo u = t;
      u.attrs = {{"a", "1"}, {"b", "2"}};
      std::string m = meta_of(u);
      m[m.size() - 2] = 'a';  // second key "b" -> "a"
      return with_first_meta(m, ten_bytes);
    }
    case Corruption::duplicate_attribute_early:
    case Corruption::duplicate_attribute_late: {
      // 40 keys k00..k39: past the first 16 the reader's duplicate test changes method (a set
      // in place of comparing with the keys before), so the last key is made a copy of one from
      // before the switch (k05) and of one from after it (k20).
      TensorInfo u = t;
      u.attrs.clear();
      for (int i = 0; i < 40; ++i) u.attrs.emplace_back(fmt::format("k{:02}", i), "1");
      std::string m = meta_of(u);
      const char* copy = c == Corruption::duplicate_attribute_early ? "05" : "20";
      m[m.size() - 3] = copy[0];  // the last key "k39" (followed by its value "1")
      m[m.size() - 2] = copy[1];
      return with_first_meta(m, ten_bytes);
    }
    case Corruption::affine_on_float: {
      TensorInfo u;
      u.name = "q";
      u.dtype = DType::i8;
      u.shape = {40};
      u.encoding.kind = EncodingKind::affine_tensor;
      u.encoding.scales = {1.0};
      u.encoding.zero_points = {0};
      std::string m = meta_of(u);
      // An f16 tensor of 20 elements (the same 40 bytes) with an affine encoding.
      store_le<uint16_t>(reinterpret_cast<std::byte*>(m.data()) + 12, static_cast<uint16_t>(DType::f16));
      store_le<uint64_t>(reinterpret_cast<std::byte*>(m.data()) + 32, 20);
      return with_first_meta(m, ten_bytes);
    }
    case Corruption::nonfinite_scale: {
      TensorInfo u;
      u.name = "q";
      u.dtype = DType::i8;
      u.shape = {40};
      u.encoding.kind = EncodingKind::affine_tensor;
      u.encoding.scales = {1.0};
      u.encoding.zero_points = {0};
      std::string m = meta_of(u);
      store_le<double>(reinterpret_cast<std::byte*>(m.data()) + m.size() - 16, std::numeric_limits<double>::infinity());
      return with_first_meta(m, ten_bytes);
    }
    case Corruption::bool_value: {
      TensorInfo u;
      u.name = "mask";
      u.dtype = DType::boolean;
      u.shape = {40};
      std::vector<std::byte> p(40, std::byte{1});
      p[17] = std::byte{2};
      return with_first_meta(meta_of(u), p);
    }
    case Corruption::record_after_end: {
      auto rec = dstest::raw_record(kKindTensor, 0, meta_of(t), ten_bytes, kSalt);
      f.insert(f.end(), rec.begin(), rec.end());
      return f;
    }
    case Corruption::end_points_elsewhere: {
      uint64_t end = f.size() - 64;
      store_le<uint64_t>(f.data() + end + kFrameSize, h);
      dstest::refresh_record_crcs(f, end);
      return f;
    }
  }
  return f;
}

const Case kCases[] = {
    {Corruption::short_file, "short_file", Errc::truncated_header, true},
    {Corruption::bad_magic, "bad_magic", Errc::bad_magic, true},
    {Corruption::future_major, "future_major", Errc::unsupported_version, true},
    {Corruption::bad_byte_order, "bad_byte_order", Errc::bad_byte_order, true},
    {Corruption::unknown_required_feature, "unknown_required_feature", Errc::unsupported_feature, true},
    {Corruption::reserved_header, "reserved_header", Errc::reserved_nonzero, true},
    {Corruption::header_length_mismatch, "header_length_mismatch", Errc::length_mismatch, true},
    {Corruption::bad_header_crc, "bad_header_crc", Errc::bad_header_checksum, true},
    {Corruption::metadata_count_over_limit, "metadata_count_over_limit", Errc::limit_exceeded, true},
    {Corruption::duplicate_metadata_key, "duplicate_metadata_key", Errc::duplicate_key, true},
    {Corruption::metadata_bad_utf8, "metadata_bad_utf8", Errc::bad_utf8, true},
    {Corruption::bad_record_magic, "bad_record_magic", Errc::bad_record_magic, false},
    {Corruption::bad_frame_crc, "bad_frame_crc", Errc::bad_frame_checksum, false},
    {Corruption::spliced_record, "spliced_record", Errc::salt_mismatch, false},
    {Corruption::record_length_inconsistent, "record_length_inconsistent", Errc::length_mismatch, false},
    {Corruption::payload_length_over_limit, "payload_length_over_limit", Errc::limit_exceeded, false},
    {Corruption::frame_reserved, "frame_reserved", Errc::reserved_nonzero, false},
    {Corruption::frame_reserved_flags, "frame_reserved_flags", Errc::reserved_nonzero, false},
    {Corruption::unknown_kind, "unknown_kind", Errc::unknown_record_kind, false},
    {Corruption::bad_record_crc, "bad_record_crc", Errc::bad_record_checksum, false},
    {Corruption::nonzero_meta_padding, "nonzero_meta_padding", Errc::nonzero_padding, false},
    {Corruption::nonzero_payload_padding, "nonzero_payload_padding", Errc::nonzero_padding, false},
    {Corruption::bad_dtype, "bad_dtype", Errc::bad_dtype, false},
    {Corruption::rank_over_limit, "rank_over_limit", Errc::limit_exceeded, false},
    {Corruption::bad_role, "bad_role", Errc::bad_enum, false},
    {Corruption::bad_encoding_enum, "bad_encoding_enum", Errc::bad_enum, false},
    {Corruption::meta_reserved, "meta_reserved", Errc::reserved_nonzero, false},
    {Corruption::empty_name, "empty_name", Errc::empty_name, false},
    {Corruption::name_over_limit, "name_over_limit", Errc::limit_exceeded, false},
    {Corruption::name_bad_utf8, "name_bad_utf8", Errc::bad_utf8, false},
    {Corruption::shape_overflow, "shape_overflow", Errc::shape_overflow, false},
    {Corruption::payload_size_mismatch, "payload_size_mismatch", Errc::length_mismatch, false},
    {Corruption::axes_count, "axes_count", Errc::bad_axes, false},
    {Corruption::meta_trailing_bytes, "meta_trailing_bytes", Errc::length_mismatch, false},
    {Corruption::meta_too_short, "meta_too_short", Errc::length_mismatch, false},
    {Corruption::duplicate_attribute, "duplicate_attribute", Errc::duplicate_key, false},
    {Corruption::duplicate_attribute_early, "duplicate_attribute_early", Errc::duplicate_key, false},
    {Corruption::duplicate_attribute_late, "duplicate_attribute_late", Errc::duplicate_key, false},
    {Corruption::affine_on_float, "affine_on_float", Errc::bad_encoding, false},
    {Corruption::nonfinite_scale, "nonfinite_scale", Errc::bad_value, false},
    {Corruption::bool_value, "bool_value", Errc::bad_value, false},
    {Corruption::record_after_end, "record_after_end", Errc::record_after_end, false},
    {Corruption::end_points_elsewhere, "end_points_elsewhere", Errc::bad_index, false},
};

class CorruptFile : public ::testing::TestWithParam<Case> {};

TEST_P(CorruptFile, IsRejectedWithItsExactCode) {
  const Case& c = GetParam();
  auto f = make(c.c);
  for (bool use_index : {false, true}) {
    Outcome o = open_bytes(f, use_index);
    if (c.open_fails) {
      EXPECT_FALSE(o.opened) << c.name;
      EXPECT_EQ(o.code, c.expect) << c.name << ": got " << errc_name(o.code);
    } else {
      ASSERT_TRUE(o.opened) << c.name;
      EXPECT_EQ(o.state, FileState::corrupt) << c.name;
      EXPECT_EQ(o.code, c.expect) << c.name << ": got " << errc_name(o.code);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BySection, CorruptFile, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(CorruptFile, CorruptionReportNamesTheTensorAndOffset) {
  auto f = base_file();
  uint64_t h = header_length(f);
  uint64_t second = h + record_length_at(f, h);
  uint32_t ml = load_le<uint32_t>(f.data() + second + frm::meta_length);
  f[second + payload_start(ml) + 5] ^= std::byte{0x40};  // a payload bit of layer.1
  auto r = Reader::from_memory(f, {Verify::full, false, false});
  ASSERT_TRUE(r.ok());
  const auto& in = r->integrity();
  EXPECT_EQ(in.state, FileState::corrupt);
  ASSERT_TRUE(in.corruption.has_value());
  EXPECT_EQ(in.corruption->code, Errc::bad_record_checksum);
  EXPECT_EQ(in.corruption->offset, second + frm::record_crc);
  EXPECT_NE(in.corruption->message.find("offset"), std::string::npos);
  EXPECT_EQ(r->records().size(), 1u);  // layer.0 is still usable
}

TEST(CorruptFile, ResyncRecoversRecordsAfterDamage) {
  auto f = base_file();
  uint64_t h = header_length(f);
  f[h + kFrameSize + 3] ^= std::byte{1};  // damage layer.0's meta
  OpenOptions o;
  o.use_index = false;
  o.resync = true;
  auto r = Reader::from_memory(f, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::corrupt);
  ASSERT_EQ(r->records().size(), 2u);
  EXPECT_EQ(r->records()[0].info.name, "layer.1");
  EXPECT_FALSE(r->integrity().warnings.empty());
}

TEST(CorruptFile, SkippableUnknownKindIsSkipped) {
  auto f = base_file(false);
  std::vector<std::byte> payload(8, std::byte{7});
  auto rec = dstest::raw_record(0x8001, kFlagSkippable, "private", payload, kSalt);
  f.insert(f.end(), rec.begin(), rec.end());
  auto r = Reader::from_memory(f, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::unfinished);
  EXPECT_EQ(r->records().size(), 3u);
}

TEST(CorruptFile, ZeroFilledTailIsACutNotCorruption) {
  auto f = base_file(false);
  size_t n = f.size();
  f.resize(n + 4096, std::byte{0});  // what a file system leaves after a crash
  auto r = Reader::from_memory(f, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->integrity().state, FileState::cut);
  EXPECT_EQ(r->integrity().cut_offset, n);
  EXPECT_EQ(r->integrity().discarded_bytes, 4096u);
  EXPECT_EQ(r->records().size(), 3u);
}

}  // namespace

namespace {

TEST(CorruptFile, IndexThatDisagreesWithTheRecordsIsBadIndex) {
  auto f = base_file();
  // Entry 1's occurrence says 7 (it is 0); the INDEX record's own checksums are made valid, so
  // only the comparison with the records can notice.
  uint64_t end = f.size() - 64;
  uint64_t index_pos = load_le<uint64_t>(f.data() + end + kFrameSize);
  uint32_t ml = load_le<uint32_t>(f.data() + index_pos + frm::meta_length);
  uint64_t entries = index_pos + payload_start(ml);
  store_le<uint32_t>(f.data() + entries + kIndexEntrySize + 16, 7);
  dstest::refresh_record_crcs(f, index_pos);
  auto r = Reader::from_memory(f, {Verify::full, true, false});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->integrity().index_used);
  EXPECT_EQ(r->integrity().state, FileState::corrupt);
  ASSERT_TRUE(r->integrity().corruption.has_value());
  EXPECT_EQ(r->integrity().corruption->code, Errc::bad_index);
  EXPECT_EQ(r->records().size(), 3u);  // the records themselves are all usable
}

}  // namespace
