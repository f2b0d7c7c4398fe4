// The golden vectors (tests/vectors/, made by generate.py from the spec writer) against the C++
// Reader and Writer: every vector reads back as its JSON sidecar says, in every read mode, and
// the Writer reproduces every reproducible valid vector byte for byte (WriterOptions fixed_salt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/bytes.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"

namespace driftscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kVectors = fs::path(DS_SOURCE_DIR) / "tests" / "vectors";

std::vector<fs::path> sidecars() {
  std::vector<fs::path> out;
  for (const char* sub : {"valid", "damaged", "rejected", "invalid"})
    for (const auto& e : fs::directory_iterator(kVectors / sub))
      if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

json load_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::string load_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// JSON has no NaN or infinities: the sidecars spell them "nan", "inf", "-inf".
double num(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? INFINITY : -INFINITY;
  }
  return v.get<double>();
}

// Same value, NaN equal to NaN, and the sign of zero counts.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

Role role_from(const std::string& s) {
  for (uint8_t r = 0; r < 4; ++r)
    if (role_name(Role{r}) == s) return Role{r};
  ADD_FAILURE() << "unknown role " << s;
  return Role::other;
}

EncodingKind encoding_from(const std::string& s) {
  if (s == "affine_tensor") return EncodingKind::affine_tensor;
  if (s == "affine_channel") return EncodingKind::affine_channel;
  return EncodingKind::raw;
}

// The TensorInfo a sidecar record describes (exec_index and occurrence as stored).
TensorInfo info_from(const json& r) {
  TensorInfo t;
  t.name = r["name"];
  t.op_type = r["op_type"];
  t.role = role_from(r["role"]);
  t.role_index = r["role_index"];
  t.exec_index = r["exec_index"];
  t.occurrence = r["occurrence"];
  t.dtype = *parse_dtype(r["dtype"].get<std::string>());
  t.shape = r["shape"].get<std::vector<uint64_t>>();
  t.axes = r["axes"].get<std::vector<std::string>>();
  for (const auto& kv : r["attrs"]) t.attrs.emplace_back(kv[0], kv[1]);
  const json& e = r["encoding"];
  t.encoding.kind = encoding_from(e["kind"]);
  if (t.encoding.kind != EncodingKind::raw) {
    t.encoding.axis = e.value("axis", 0u);
    t.encoding.scales = e["scales"].get<std::vector<double>>();
    t.encoding.zero_points = e["zero_points"].get<std::vector<int64_t>>();
  }
  return t;
}

Summary summary_from(const json& s) {
  Summary out;
  out.stats.count = s["count"];
  out.stats.nan_count = s["nan_count"];
  out.stats.posinf_count = s["posinf_count"];
  out.stats.neginf_count = s["neginf_count"];
  out.stats.zero_count = s["zero_count"];
  out.stats.min = num(s["min"]);
  out.stats.max = num(s["max"]);
  out.stats.mean = num(s["mean"]);
  out.stats.std = num(s["std"]);
  out.stats.l2_norm = num(s["l2_norm"]);
  out.projection_seed = s["projection_seed"];
  out.projection_kind = s["projection_kind"];
  for (const auto& p : s["projection"]) out.projection.push_back(static_cast<float>(num(p)));
  return out;
}

// Integer elements compared exactly (i64/u64 extremes do not survive a double).
json raw_integer(DType t, const std::byte* p) {
  switch (t) {
    case DType::i64: return detail::load_le<int64_t>(p);
    case DType::i32: return detail::load_le<int32_t>(p);
    case DType::i16: return detail::load_le<int16_t>(p);
    case DType::i8: return static_cast<int8_t>(p[0]);
    case DType::u8: return static_cast<uint8_t>(p[0]);
    case DType::u16: return detail::load_le<uint16_t>(p);
    case DType::u32: return detail::load_le<uint32_t>(p);
    case DType::u64: return detail::load_le<uint64_t>(p);
    case DType::boolean: return static_cast<uint8_t>(p[0]) != 0;
    default: return nullptr;
  }
}

void expect_record(const Record& got, const json& w, const std::string& where) {
  SCOPED_TRACE(where + " record " + w["name"].get<std::string>());
  EXPECT_EQ(got.kind == RecordKind::summary ? "summary" : "tensor", w["kind"].get<std::string>());
  const TensorInfo want = info_from(w);
  EXPECT_EQ(got.info.name, want.name);
  EXPECT_EQ(got.info.op_type, want.op_type);
  EXPECT_EQ(got.info.role, want.role);
  EXPECT_EQ(got.info.role_index, want.role_index);
  EXPECT_EQ(got.info.exec_index, want.exec_index);
  EXPECT_EQ(got.info.occurrence, want.occurrence);
  EXPECT_EQ(got.info.dtype, want.dtype);
  EXPECT_EQ(got.info.shape, want.shape);
  EXPECT_EQ(got.info.axes, want.axes);
  EXPECT_EQ(got.info.attrs, want.attrs);
  EXPECT_EQ(got.info.encoding.kind, want.encoding.kind);
  if (want.encoding.kind == EncodingKind::affine_channel) {
    EXPECT_EQ(got.info.encoding.axis, want.encoding.axis);
  }
  EXPECT_EQ(got.info.encoding.scales, want.encoding.scales);
  EXPECT_EQ(got.info.encoding.zero_points, want.encoding.zero_points);
  EXPECT_EQ(got.offset, w["offset"].get<uint64_t>());
  EXPECT_EQ(got.size, w["size"].get<uint64_t>());
  EXPECT_EQ(got.payload_offset, w["payload_offset"].get<uint64_t>());
  EXPECT_EQ(got.payload.size(), w["payload_length"].get<uint64_t>());

  if (got.kind == RecordKind::summary) {
    ASSERT_NE(got.summary(), nullptr);
    const Summary want_s = summary_from(w["summary"]);
    const TensorStats &a = got.summary()->stats, &b = want_s.stats;
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.nan_count, b.nan_count);
    EXPECT_EQ(a.posinf_count, b.posinf_count);
    EXPECT_EQ(a.neginf_count, b.neginf_count);
    EXPECT_EQ(a.zero_count, b.zero_count);
    EXPECT_TRUE(same(a.min, b.min) && same(a.max, b.max) && same(a.mean, b.mean) &&
                same(a.std, b.std) && same(a.l2_norm, b.l2_norm));
    EXPECT_EQ(got.summary()->projection_seed, want_s.projection_seed);
    EXPECT_EQ(got.summary()->projection_kind, want_s.projection_kind);
    EXPECT_EQ(got.summary()->projection, want_s.projection);
    return;
  }
  const json& values = w["values"];
  const uint64_t n = got.info.numel();
  ASSERT_EQ(values.size(), n);
  if (dtype_is_integer(got.info.dtype) || got.info.dtype == DType::boolean) {
    const size_t size = dtype_size(got.info.dtype);
    for (uint64_t i = 0; i < n; ++i)
      EXPECT_EQ(raw_integer(got.info.dtype, got.payload.data() + i * size), values[i]) << "element " << i;
  }
  // decode() widens floats exactly and dequantizes affine encodings (the "dequantized" list).
  const json& decoded = w.contains("dequantized") ? w["dequantized"] : values;
  if (dtype_is_float(got.info.dtype) || w.contains("dequantized")) {
    std::vector<double> out(n);
    auto r = decode(got.info, got.payload, 0, out);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    for (uint64_t i = 0; i < n; ++i)
      EXPECT_TRUE(same(out[i], num(decoded[i]))) << "element " << i << ": " << out[i] << " vs " << decoded[i];
  }
}


struct Mode {
  const char* name;
  OpenOptions options;
};

std::vector<Mode> modes() {
  OpenOptions index, scan, frames;
  scan.use_index = false;
  frames.verify = Verify::frames;
  frames.use_index = false;
  return {{"index", index}, {"scan", scan}, {"frames", frames}};
}

std::vector<fs::path> reproducible() {
  std::vector<fs::path> out;
  for (const auto& p : sidecars()) {
    json j = load_json(p);
    if (j.contains("writer") && j["writer"]["reproducible"].get<bool>()) out.push_back(p);
  }
  return out;
}

class Vector : public ::testing::TestWithParam<fs::path> {};
class WrittenVector : public ::testing::TestWithParam<fs::path> {};

TEST_P(Vector, ReaderMatchesSidecar) {
  const json want = load_json(GetParam());
  const fs::path file = GetParam().parent_path() / want["file"].get<std::string>();
  ASSERT_EQ(fs::file_size(file), want["size"].get<uint64_t>());

  for (const Mode& mode : modes()) {
    SCOPED_TRACE(std::string("mode ") + mode.name);
    auto reader = Reader::open(file.string(), mode.options);
    if (want.contains("error")) {
      ASSERT_FALSE(reader.ok());
      EXPECT_EQ(errc_name(reader.error().code), want["error"]["code"].get<std::string>());
      EXPECT_EQ(reader.error().offset, want["error"]["offset"].get<uint64_t>()) << reader.error().to_string();
      continue;
    }
    ASSERT_TRUE(reader.ok()) << reader.error().to_string();
    const json& wi = want["integrity"];
    const json& records = want["records"];
    // Verify::frames defers payload checksums to verify_payload() (except for the last record,
    // the one a crash may have torn), so a bad record CRC in the middle is found there.
    if (mode.options.verify == Verify::frames && !wi["corruption"].is_null() &&
        wi["corruption"]["code"] == "bad_record_checksum") {
      const uint64_t bad = wi["corruption"]["record_offset"];
      ASSERT_GT(reader->records().size(), records.size());
      for (size_t i = 0; i < records.size(); ++i) expect_record(reader->records()[i], records[i], mode.name);
      const Record& r = reader->records()[records.size()];
      ASSERT_EQ(r.offset, bad);
      auto v = reader->verify_payload(r);
      ASSERT_FALSE(v.ok());
      EXPECT_EQ(v.error().code, Errc::bad_record_checksum);
      EXPECT_EQ(v.error().offset, wi["corruption"]["offset"].get<uint64_t>()) << v.error().to_string();
      continue;
    }
    const FileHeader& h = reader->header();
    EXPECT_EQ(h.version_major, want["header"]["version"][0].get<uint16_t>());
    EXPECT_EQ(h.version_minor, want["header"]["version"][1].get<uint16_t>());
    EXPECT_EQ(h.salt, want["header"]["salt"].get<uint64_t>());
    KeyValues meta;
    for (const auto& kv : want["header"]["metadata"]) meta.emplace_back(kv[0], kv[1]);
    EXPECT_EQ(h.metadata, meta);

    const Integrity& in = reader->integrity();
    EXPECT_EQ(file_state_name(in.state), wi["state"].get<std::string>());
    EXPECT_EQ(in.file_size, want["size"].get<uint64_t>());
    EXPECT_EQ(in.valid_end, wi["valid_end"].get<uint64_t>());
    EXPECT_EQ(in.cut_offset, wi["cut_offset"].is_null() ? kNoOffset : wi["cut_offset"].get<uint64_t>());
    EXPECT_EQ(in.discarded_bytes, wi["discarded_bytes"].get<uint64_t>());
    EXPECT_TRUE(in.warnings.empty());
    if (wi["corruption"].is_null()) {
      EXPECT_FALSE(in.corruption.has_value()) << in.corruption->to_string();
    } else {
      ASSERT_TRUE(in.corruption.has_value());
      const json& c = wi["corruption"];
      EXPECT_EQ(errc_name(in.corruption->code), c["code"].get<std::string>()) << in.corruption->to_string();
      EXPECT_EQ(in.corruption->offset, c["offset"].get<uint64_t>()) << in.corruption->to_string();
      EXPECT_EQ(in.corrupt_name, c["name"].is_null() ? "" : c["name"].get<std::string>());
    }

    ASSERT_EQ(reader->records().size(), records.size());
    for (size_t i = 0; i < records.size(); ++i) {
      expect_record(reader->records()[i], records[i], mode.name);
      if (mode.options.verify == Verify::frames) {
        auto v = reader->verify_payload(reader->records()[i]);
        EXPECT_TRUE(v.ok()) << v.error().to_string();
      }
      const TensorInfo t = info_from(records[i]);
      const Record* found = reader->find(t.name, t.occurrence, t.role, t.role_index);
      ASSERT_NE(found, nullptr) << t.name;
      EXPECT_EQ(found->offset, records[i]["offset"].get<uint64_t>());
    }
  }
}

// The Writer, fed the sidecar's records in order (with the payload bytes of the golden file),
// writes the golden file exactly. "sessions" splits the records into writer sessions, each after
// the first reopening the file with append=true (§5 Append); an unfinished vector is compared
// after flush(), before close() adds INDEX and END.
TEST_P(WrittenVector, WriterReproducesIt) {
  const json want = load_json(GetParam());
  const fs::path golden = GetParam().parent_path() / want["file"].get<std::string>();
  const std::string bytes = load_bytes(golden);
  const fs::path out = fs::path(::testing::TempDir()) / ("ds_vec_" + golden.filename().string());
  fs::remove(out);

  WriterOptions opt;
  opt.fixed_salt = true;
  opt.salt = want["header"]["salt"];
  for (const auto& kv : want["header"]["metadata"]) opt.metadata.emplace_back(kv[0], kv[1]);

  const json& records = want["records"];
  const bool closed = want["writer"]["closed"];
  size_t next = 0;
  std::unique_ptr<Writer> still_open;  // the unfinished vector is compared before close()
  const json& sessions = want["writer"]["sessions"];
  for (size_t s = 0; s < sessions.size(); ++s) {
    opt.append = s > 0;
    auto w = Writer::create(out.string(), opt);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    for (size_t k = 0; k < sessions[s].get<size_t>(); ++k, ++next) {
      const json& r = records[next];
      const TensorInfo info = info_from(r);
      Result<WriteResult> res = WriteResult{};
      if (r["kind"] == "summary") {
        res = (*w)->write_summary(info, summary_from(r["summary"]));
      } else {
        const auto* p = reinterpret_cast<const std::byte*>(bytes.data()) + r["payload_offset"].get<uint64_t>();
        res = (*w)->write(info, {p, r["payload_length"].get<size_t>()});
      }
      ASSERT_TRUE(res.ok()) << res.error().to_string();
      EXPECT_EQ(res->status, WriteStatus::written);
      EXPECT_EQ(res->offset, r["offset"].get<uint64_t>()) << info.name;
    }
    if (s + 1 == sessions.size() && !closed) {
      ASSERT_TRUE((*w)->flush().ok());
      still_open = std::move(*w);
      break;
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  const std::string made = load_bytes(out);
  ASSERT_EQ(made.size(), bytes.size());
  for (size_t i = 0; i < made.size(); ++i)
    ASSERT_EQ(static_cast<unsigned char>(made[i]), static_cast<unsigned char>(bytes[i]))
        << "first differing byte at offset " << i;
  still_open.reset();
  fs::remove(out);
}

std::string vector_name(const ::testing::TestParamInfo<fs::path>& info) {
  std::string s = info.param.parent_path().filename().string() + "_" + info.param.stem().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Golden, Vector, ::testing::ValuesIn(sidecars()), vector_name);
INSTANTIATE_TEST_SUITE_P(Golden, WrittenVector, ::testing::ValuesIn(reproducible()), vector_name);

TEST(Vectors, AllKindsPresent) {
  size_t valid = 0, damaged = 0, rejected = 0, invalid = 0;
  for (const auto& p : sidecars()) {
    std::string dir = p.parent_path().filename().string();
    valid += dir == "valid";
    damaged += dir == "damaged";
    rejected += dir == "rejected";
    invalid += dir == "invalid";
  }
  EXPECT_GE(valid, 8u);
  EXPECT_GE(damaged, 6u);
  EXPECT_GE(rejected, 20u);
  EXPECT_GE(invalid, 10u);
  // Every valid vector but private_record (the Writer writes no private record kinds).
  EXPECT_EQ(reproducible().size(), valid - 1);
}

// docs/format.md §3.6 is enough to check a summary: the SUMMARY of summary_checked.tdump was
// computed by generate.py from the spec text; summarize() of the TENSOR beside it must agree
// (counts, min, max and the projection exactly; mean, std and l2_norm to rounding).
TEST(Vectors, SummaryRecomputedFromItsValues) {
  const fs::path dir = kVectors / "valid";
  const json want = load_json(dir / "summary_checked.json");
  auto r = Reader::open((dir / want["file"].get<std::string>()).string());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  size_t checked = 0;
  for (size_t i = 0; i < want["records"].size(); ++i) {
    const json& w = want["records"][i];
    if (!w.contains("summary_of")) continue;
    const Record& values = r->records()[w["summary_of"].get<size_t>()];
    const Summary& stored = *r->records()[i].summary();
    auto s = summarize(values.info, values.payload, static_cast<uint32_t>(stored.projection.size()),
                       stored.projection_seed);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    const TensorStats &a = s->stats, &b = stored.stats;
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.nan_count, b.nan_count);
    EXPECT_EQ(a.posinf_count, b.posinf_count);
    EXPECT_EQ(a.neginf_count, b.neginf_count);
    EXPECT_EQ(a.zero_count, b.zero_count);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.max, b.max);
    EXPECT_NEAR(a.mean, b.mean, 1e-12 * std::abs(b.mean));
    EXPECT_NEAR(a.std, b.std, 1e-12 * std::abs(b.std));
    EXPECT_NEAR(a.l2_norm, b.l2_norm, 1e-12 * std::abs(b.l2_norm));
    EXPECT_EQ(s->projection, stored.projection);
    ++checked;
  }
  EXPECT_EQ(checked, 1u);
}

}  // namespace
}  // namespace driftscope
