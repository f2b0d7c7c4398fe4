// The reader keeps a compact table and builds Reader::records() on first use (issue 13 §5): the
// records it builds, and those the comparison engine decodes one at a time
// (detail::ReaderAccess), are exactly what the scan checked; counts, lookups and the duplicate
// warning need no built records.
#include <gtest/gtest.h>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "format/record_table.hpp"
#include "test_util.hpp"

using namespace driftscope;
using dstest::as_bytes;

namespace {

void expect_same(const Record& x, const Record& y) {
  EXPECT_EQ(x.kind, y.kind);
  EXPECT_EQ(x.offset, y.offset);
  EXPECT_EQ(x.size, y.size);
  EXPECT_EQ(x.payload_offset, y.payload_offset);
  EXPECT_EQ(x.payload.data(), y.payload.data());
  EXPECT_EQ(x.payload.size(), y.payload.size());
  EXPECT_EQ(x.info.name, y.info.name);
  EXPECT_EQ(x.info.op_type, y.info.op_type);
  EXPECT_EQ(x.info.role, y.info.role);
  EXPECT_EQ(x.info.role_index, y.info.role_index);
  EXPECT_EQ(x.info.exec_index, y.info.exec_index);
  EXPECT_EQ(x.info.occurrence, y.info.occurrence);
  EXPECT_EQ(x.info.dtype, y.info.dtype);
  EXPECT_EQ(x.info.shape, y.info.shape);
  EXPECT_EQ(x.info.axes, y.info.axes);
  EXPECT_EQ(x.info.attrs, y.info.attrs);
  EXPECT_EQ(x.info.encoding.kind, y.info.encoding.kind);
  EXPECT_EQ(x.info.encoding.scales, y.info.encoding.scales);
  EXPECT_EQ(x.info.encoding.zero_points, y.info.encoding.zero_points);
  ASSERT_EQ(x.summary() != nullptr, y.summary() != nullptr);
  if (x.summary()) {
    EXPECT_EQ(x.summary()->projection, y.summary()->projection);
    EXPECT_EQ(x.summary()->projection_seed, y.summary()->projection_seed);
    EXPECT_EQ(x.summary()->stats.l2_norm, y.summary()->stats.l2_norm);
  }
}

std::string write_mixed(const std::string& name) {
  const std::string path = dstest::scratch_path(name);
  WriterOptions o;
  o.fixed_salt = true;
  o.salt = 7;
  auto w = Writer::create(path, o);
  EXPECT_TRUE(w.ok());
  TensorInfo a = dstest::f32_info("encoder.layers.0.attn", {2, 3});
  a.axes = {"seq", "hidden"};
  a.attrs = {{"ds.kind", "float"}, {"note", "héllo"}};
  a.occurrence = 0;
  EXPECT_TRUE((*w)->write(a, as_bytes(dstest::ramp(6, 0.5f))).ok());
  TensorInfo q;
  q.name = "quantized";
  q.dtype = DType::i8;
  q.shape = {4};
  q.role = Role::parameter;
  q.role_index = 1;
  q.encoding.kind = EncodingKind::affine_tensor;
  q.encoding.scales = {0.25};
  q.encoding.zero_points = {3};
  std::vector<int8_t> qv = {1, -2, 3, -4};
  EXPECT_TRUE((*w)->write(q, as_bytes(qv)).ok());
  Summary s;
  s.stats.count = 6;
  s.stats.min = -1;
  s.stats.max = 2;
  s.stats.mean = 0.5;
  s.stats.std = 1;
  s.stats.l2_norm = 3;
  s.projection_seed = 42;
  s.projection = {1.5f, -2.5f, 0.0f};
  EXPECT_TRUE((*w)->write_summary(dstest::f32_info("light", {2, 3}), s).ok());
  // The same identity again: a warning, the first record is used.
  EXPECT_TRUE((*w)->write(a, as_bytes(dstest::ramp(6, 2.0f))).ok());
  EXPECT_TRUE((*w)->close().ok());
  return path;
}

}  // namespace

TEST(RecordTable, RecordsAreBuiltOnDemandAsTheScanSawThem) {
  const std::string path = write_mixed("record-table");
  for (Verify v : {Verify::full, Verify::frames}) {
    OpenOptions o;
    o.verify = v;
    auto r = Reader::open(path, o);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    // Counted, and the duplicate found, from the table alone.
    EXPECT_EQ(r->record_count(), 4u);
    ASSERT_EQ(r->integrity().warnings.size(), 1u);
    const Error& dup = r->integrity().warnings[0];
    EXPECT_EQ(dup.code, Errc::duplicate_tensor);
    EXPECT_EQ(dup.message, "tensor 'encoder.layers.0.attn' (output 0, occurrence 0) appears again; the first "
                           "one is used (at offset " + std::to_string(dup.offset) + ")");
    // Decoded one at a time (the engine's way) before and after records() built them all.
    std::vector<Record> one_by_one;
    for (size_t i = 0; i < r->record_count(); ++i) one_by_one.push_back(detail::ReaderAccess::record(*r, i));
    ASSERT_EQ(r->records().size(), 4u);
    EXPECT_EQ(dup.offset, r->records()[3].offset);
    for (size_t i = 0; i < 4; ++i) {
      SCOPED_TRACE(i);
      expect_same(one_by_one[i], r->records()[i]);
      expect_same(detail::ReaderAccess::record(*r, i), r->records()[i]);
      EXPECT_EQ(detail::ReaderAccess::exec_index(*r, i), r->records()[i].info.exec_index);
    }
    EXPECT_EQ(r->records()[1].info.encoding.scales, (std::vector<double>{0.25}));
    ASSERT_NE(r->records()[2].summary(), nullptr);
    EXPECT_EQ(r->records()[2].summary()->projection, (std::vector<float>{1.5f, -2.5f, 0.0f}));
  }
}

// find() before anything else builds the records it points into; the first of a duplicate wins.
TEST(RecordTable, FindBuildsTheRecords) {
  const std::string path = write_mixed("record-table-find");
  for (bool index : {true, false}) {
    OpenOptions o;
    o.use_index = index;
    auto r = Reader::open(path, o);
    ASSERT_TRUE(r.ok());
    const Record* a = r->find("encoder.layers.0.attn");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a, &r->records()[0]);
    const Record* q = r->find("quantized", 0, Role::parameter, 1);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->info.encoding.zero_points, (std::vector<int64_t>{3}));
    EXPECT_EQ(r->find("absent"), nullptr);
    EXPECT_EQ(r->find_all("encoder.layers.0.attn").size(), 2u);
  }
}

// The engine's lookup (the float64 run of --reference64) finds the same record as find() from the
// table, with and without the footer index, without building records().
TEST(RecordTable, LookupByIdentityGivesFindsRecordIndex) {
  const std::string path = write_mixed("record-table-lookup");
  for (bool index : {true, false}) {
    SCOPED_TRACE(index);
    OpenOptions o;
    o.use_index = index;
    auto r = Reader::open(path, o);
    ASSERT_TRUE(r.ok());
    auto a = detail::ReaderAccess::find(*r, "encoder.layers.0.attn", 0, Role::output, 0);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(*a, 0u);  // the first of the duplicate identity, not record 3
    auto q = detail::ReaderAccess::find(*r, "quantized", 0, Role::parameter, 1);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(detail::ReaderAccess::record(*r, *q).info.name, "quantized");
    // Every part of the identity counts.
    EXPECT_FALSE(detail::ReaderAccess::find(*r, "quantized", 0, Role::parameter, 0).has_value());
    EXPECT_FALSE(detail::ReaderAccess::find(*r, "quantized", 1, Role::parameter, 1).has_value());
    EXPECT_FALSE(detail::ReaderAccess::find(*r, "quantized", 0, Role::output, 1).has_value());
    EXPECT_FALSE(detail::ReaderAccess::find(*r, "quantize", 0, Role::parameter, 1).has_value());
    EXPECT_FALSE(detail::ReaderAccess::find(*r, "absent", 0, Role::output, 0).has_value());
    // find() agrees, record for record.
    EXPECT_EQ(r->find("quantized", 0, Role::parameter, 1), &r->records()[*q]);
    EXPECT_EQ(r->find("encoder.layers.0.attn"), &r->records()[*a]);
  }
}

// Whether any record carries an attribute the checks by axis name read (axes_ops, norm_axes,
// softmax_axis), as the scan saw it: compare skips its by-name pass over every record's meta when
// neither dump has one (issue 30 item 4), so the flag must be set by any one record of either kind.
TEST(RecordTable, AxesAttributesAreNotedByTheScan) {
  auto dump = [](const std::string& name, std::vector<std::pair<std::string, std::string>> attrs, bool summary) {
    const std::string path = dstest::scratch_path(name);
    auto w = Writer::create(path);
    EXPECT_TRUE(w.ok());
    TensorInfo plain = dstest::f32_info("plain", {2, 3});
    plain.attrs = {{"ds.inputs", ""}, {"ds.kind", "float"}, {"ds.source", "Linear  model.py:1"}};
    EXPECT_TRUE((*w)->write(plain, as_bytes(dstest::ramp(6, 0.5f))).ok());
    TensorInfo t = dstest::f32_info("tagged", {2, 3});
    t.axes = {"seq", "hidden"};
    t.attrs = std::move(attrs);
    if (summary) {
      Summary s;
      s.stats.count = 6;
      s.stats.l2_norm = 1;
      s.projection_seed = 42;
      s.projection = {1.5f};
      EXPECT_TRUE((*w)->write_summary(t, s).ok());
    } else {
      EXPECT_TRUE((*w)->write(t, as_bytes(dstest::ramp(6, 1.5f))).ok());
    }
    EXPECT_TRUE((*w)->close().ok());
    auto r = Reader::open(path);
    EXPECT_TRUE(r.ok());
    return r.ok() && detail::ReaderAccess::has_axes_attributes(*r);
  };
  EXPECT_FALSE(dump("axes-none", {}, false));
  EXPECT_FALSE(dump("axes-other", {{"axes_from", "x"}, {"note", "axes_ops"}}, false));
  EXPECT_TRUE(dump("axes-ops", {{"axes_ops", "anything"}}, false));
  EXPECT_TRUE(dump("axes-norm", {{"norm_axes", "1"}}, false));
  EXPECT_TRUE(dump("axes-softmax", {{"softmax_axis", "hidden"}}, true));
}
