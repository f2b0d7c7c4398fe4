// Test helpers for the comparison engine: build small dumps with the public Writer, exactly as a
// producer would, then compare them.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "driftscope/compare.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"
// The tests read a comparison through its JSON and text reports (report_to_json, report_to_text).
#include "driftscope/report.hpp"
#include "driftscope/writer.hpp"

namespace ds_test {

using namespace driftscope;

// A fresh scratch directory per test, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> n{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("ds_compare_" + std::string(info ? info->name() : "x") + "_" +
             std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Values encoded as `dtype` (float dtypes round to nearest even; integers truncate).
inline std::vector<std::byte> encode(const std::vector<double>& v, DType t) {
  std::vector<std::byte> out(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    std::byte* p = out.data() + i * dtype_size(t);
    auto put = [&](auto x) { std::memcpy(p, &x, sizeof x); };
    switch (t) {
      case DType::f64: put(v[i]); break;
      case DType::f32: put(static_cast<float>(v[i])); break;
      case DType::f16: put(double_to_f16(v[i])); break;
      case DType::bf16: put(double_to_bf16(v[i])); break;
      case DType::i64: put(static_cast<int64_t>(v[i])); break;
      case DType::i32: put(static_cast<int32_t>(v[i])); break;
      case DType::i8: put(static_cast<int8_t>(v[i])); break;
      case DType::u8: put(static_cast<uint8_t>(v[i])); break;
      case DType::boolean: put(static_cast<uint8_t>(v[i] != 0)); break;
      default: ADD_FAILURE() << "encode: dtype not supported in tests"; break;
    }
  }
  return out;
}

struct Entry {
  std::string name;
  std::vector<double> values;
  std::vector<uint64_t> shape;  // empty: 1-D of values.size()
  DType dtype = DType::f32;
  Role role = Role::output;
  uint16_t role_index = 0;
  std::string op = "Op";
  std::vector<std::string> axes;
  uint32_t occurrence = kAutoOccurrence;
  Encoding encoding;
  bool summary = false;
  KeyValues attrs;
};

inline std::string write_dump(const std::string& path, const std::vector<Entry>& entries,
                              const KeyValues& metadata = {}) {
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = 0x1234;
  o.metadata = metadata;
  auto w = Writer::create(path, o);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().to_string());
  if (!w.ok()) return path;
  for (const auto& e : entries) {
    TensorInfo info;
    info.name = e.name;
    info.op_type = e.op;
    info.role = e.role;
    info.role_index = e.role_index;
    info.dtype = e.dtype;
    info.shape = e.shape.empty() ? std::vector<uint64_t>{e.values.size()} : e.shape;
    info.axes = e.axes;
    info.occurrence = e.occurrence;
    info.encoding = e.encoding;
    info.attrs = e.attrs;
    auto bytes = encode(e.values, e.dtype);
    if (e.summary) {
      auto s = summarize(info, bytes);
      EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
      if (!s.ok()) continue;
      auto r = (*w)->write_summary(info, *s);
      EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
    } else {
      auto r = (*w)->write(info, bytes);
      EXPECT_TRUE(r.ok()) << e.name << ": " << (r.ok() ? "" : r.error().to_string());
    }
  }
  auto c = (*w)->close();
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().to_string());
  return path;
}

// Deterministic pseudo-random values in [-1, 1) (SplitMix64), so fixtures need no <random>.
inline std::vector<double> noise(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(n);
  uint64_t x = seed;
  for (auto& e : v) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    e = scale * (static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

inline Report run_compare(const std::string& a, const std::string& b, const CompareOptions& o = {}) {
  auto r = compare_files(a, b, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  if (!r.ok()) return Report{};
  return std::move(*r);
}

// What --engine ray runs on `a` vs `b` (either may be a dump set): prepare_sets into `scratch`
// (an empty folder, which must then hold exactly the two logical dumps), compare_work split in
// two parts measured separately, assemble_report, finish; the logical dumps are removed after.
// The report, or Report{} after a recorded failure.
inline Report compare_sets_in_parts(const std::string& a, const std::string& b, const std::string& scratch,
                                    const CompareOptions& o = {}) {
  auto entries = [&] {
    return std::distance(std::filesystem::directory_iterator(scratch), std::filesystem::directory_iterator{});
  };
  auto prepared = prepare_sets(a, b, o, scratch);
  EXPECT_TRUE(prepared.ok()) << (prepared.ok() ? "" : prepared.error().to_string());
  if (!prepared.ok()) return Report{};
  EXPECT_EQ(entries(), 2);
  auto ra = Reader::open(prepared->reference_dump);
  auto ca = Reader::open(prepared->candidate_dump);
  EXPECT_TRUE(ra.ok() && ca.ok());
  if (!ra.ok() || !ca.ok()) return Report{};
  auto work = compare_work(*ra, *ca, prepared->options);
  EXPECT_TRUE(work.ok());
  if (!work.ok()) return Report{};
  EXPECT_GE(work->size(), 2u);  // two parts, both non-empty
  const size_t half = work->size() / 2;
  std::vector<std::string> blobs;
  for (auto part : {std::span<const size_t>(*work).first(half), std::span<const size_t>(*work).subspan(half)}) {
    auto blob = measure_pairs(*ra, *ca, prepared->options, part);
    EXPECT_TRUE(blob.ok()) << (blob.ok() ? "" : blob.error().to_string());
    if (!blob.ok()) return Report{};
    blobs.push_back(std::move(*blob));
  }
  auto rep = assemble_report(*ra, *ca, prepared->options, blobs);
  EXPECT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.error().to_string());
  if (!rep.ok()) return Report{};
  auto finished = prepared->finish(*rep);
  EXPECT_TRUE(finished.ok());
  std::filesystem::remove(prepared->reference_dump);
  std::filesystem::remove(prepared->candidate_dump);
  return std::move(*rep);
}

inline const PairResult* find_pair(const Report& r, const std::string& name, uint32_t occurrence = 0,
                                   Role role = Role::output) {
  for (const auto& p : r.pairs)
    if (p.ref.name() == name && p.ref.occurrence == occurrence && p.ref.role == role) return &p;
  return nullptr;
}

inline bool has_reason(const PairResult& p, const std::string& code) {
  for (const auto& r : p.reasons())
    if (r.code() == code) return true;
  return false;
}

}  // namespace ds_test
