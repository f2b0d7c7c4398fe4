// C ABI: the reader (include/driftscope/reader.hpp, docs/format.md §4).
#include <cstring>
#include <span>

#include "capi/capi_internal.hpp"
#include "driftscope/decode.hpp"

using namespace driftscope;

namespace {

Result<OpenOptions> to_open_options(const ds_open_options* o) {
  OpenOptions opts;
  if (!o) return opts;
  DRIFTSCOPE_TRY(
      capi::check_struct_size(o->struct_size, sizeof(ds_open_options), "ds_open_options"));
  if (o->verify != DS_VERIFY_FULL && o->verify != DS_VERIFY_FRAMES)
    return make_error(Errc::bad_enum, "ds_open_options.verify is " + std::to_string(o->verify) +
                                          ", allowed 0 (full) or 1 (frames)");
  opts.verify = o->verify == DS_VERIFY_FULL ? Verify::full : Verify::frames;
  opts.use_index = o->use_index != 0;
  opts.resync = o->resync != 0;
  return opts;
}

int adopt(Result<Reader>&& r, ds_reader** out) {
  if (!r) return capi::fail(r.error());
  auto handle = std::make_unique<ds_reader>(std::move(*r));
  auto recs = handle->reader.records();
  handle->records.resize(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    handle->records[i].record = &recs[i];
    handle->records[i].position = i;
    handle->records[i].axes = join_axes(recs[i].info.axes);
  }
  *out = handle.release();
  return DS_OK;
}

// Maps a C++ record pointer (into reader.records()) to its C view.
const ds_record* c_view(const ds_reader* reader, const Record* r) {
  auto recs = reader->reader.records();
  if (r >= recs.data() && r < recs.data() + recs.size())
    return &reader->records[static_cast<size_t>(r - recs.data())];
  // Not an element of the span (an implementation that copies): match by file offset, which is
  // unique per record.
  for (const ds_record& c : reader->records)
    if (c.record->offset == r->offset) return &c;
  return nullptr;
}

void fill_stats(const TensorStats& s, ds_tensor_stats* out) {
  out->count = s.count;
  out->nan_count = s.nan_count;
  out->posinf_count = s.posinf_count;
  out->neginf_count = s.neginf_count;
  out->zero_count = s.zero_count;
  out->min = s.min;
  out->max = s.max;
  out->mean = s.mean;
  out->std = s.std;
  out->l2_norm = s.l2_norm;
}

template <class T>
int decode_to(const ds_record* record, uint64_t first, T* out, size_t count) {
  if (!record) return capi::fail_null("record");
  if (!out && count > 0) return capi::fail_null("out");
  const Record& r = *record->record;
  if (r.kind != RecordKind::tensor)
    return capi::fail(make_error(Errc::invalid_argument,
                                 "record '" + r.info.name +
                                     "' is a SUMMARY: it holds statistics, not values"));
  auto d = decode(r.info, r.payload, first, std::span<T>(out, count));
  return d ? DS_OK : capi::fail(d.error());
}

}  // namespace

extern "C" {

void ds_open_options_init(ds_open_options* options) {
  if (!options) return;
  const OpenOptions d;
  *options = ds_open_options{};
  options->struct_size = sizeof(ds_open_options);
  options->verify = d.verify == Verify::full ? DS_VERIFY_FULL : DS_VERIFY_FRAMES;
  options->use_index = d.use_index ? 1 : 0;
  options->resync = d.resync ? 1 : 0;
}

int ds_reader_open(const char* path, const ds_open_options* options, ds_reader** out) {
  return capi::guarded([&]() -> int {
    if (!out) return capi::fail_null("out");
    *out = nullptr;
    if (!path) return capi::fail_null("path");
    auto opts = to_open_options(options);
    if (!opts) return capi::fail(opts.error());
    return adopt(Reader::open(path, *opts), out);
  });
}

int ds_reader_open_memory(const void* data, size_t size, const ds_open_options* options,
                          ds_reader** out) {
  return capi::guarded([&]() -> int {
    if (!out) return capi::fail_null("out");
    *out = nullptr;
    if (!data && size > 0) return capi::fail_null("data");
    auto opts = to_open_options(options);
    if (!opts) return capi::fail(opts.error());
    std::span<const std::byte> bytes(static_cast<const std::byte*>(data), data ? size : 0);
    return adopt(Reader::from_memory(bytes, *opts), out);
  });
}

void ds_reader_free(ds_reader* reader) { delete reader; }

int ds_reader_info(const ds_reader* reader, ds_file_info* out) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    if (!out) return capi::fail_null("out");
    const FileHeader& h = reader->reader.header();
    out->version_major = h.version_major;
    out->version_minor = h.version_minor;
    out->salt = h.salt;
    out->required_features = h.required_features;
    out->optional_features = h.optional_features;
    out->header_length = h.header_length;
    out->metadata_count = h.metadata.size();
    out->record_count = reader->records.size();
    return DS_OK;
  });
}

int ds_reader_metadata(const ds_reader* reader, size_t i, const char** key, size_t* key_length,
                       const char** value, size_t* value_length) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    const auto& md = reader->reader.header().metadata;
    if (i >= md.size())
      return capi::fail(make_error(Errc::invalid_argument,
                                   "metadata index " + std::to_string(i) + " out of range 0 ... " +
                                       std::to_string(md.size()) + " (exclusive)"));
    if (key) *key = md[i].first.c_str();
    if (key_length) *key_length = md[i].first.size();
    if (value) *value = md[i].second.c_str();
    if (value_length) *value_length = md[i].second.size();
    return DS_OK;
  });
}

const char* ds_reader_metadata_get(const ds_reader* reader, const char* key) {
  if (!reader || !key) return nullptr;
  for (const auto& [k, v] : reader->reader.header().metadata)
    if (k == key) return v.c_str();
  return nullptr;
}

int ds_reader_integrity(const ds_reader* reader, ds_integrity* out) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    if (!out) return capi::fail_null("out");
    const Integrity& g = reader->reader.integrity();
    out->state = static_cast<int32_t>(g.state);
    out->file_size = g.file_size;
    out->valid_end = g.valid_end;
    out->cut_offset = g.cut_offset;
    out->discarded_bytes = g.discarded_bytes;
    if (g.corruption) {
      out->corruption_status = -static_cast<int32_t>(g.corruption->code);
      out->corruption_offset = g.corruption->offset;
      out->corruption_message = g.corruption->message.c_str();
    } else {
      out->corruption_status = DS_OK;
      out->corruption_offset = DS_NO_OFFSET;
      out->corruption_message = "";
    }
    out->corrupt_name = g.corrupt_name.c_str();
    out->warning_count = g.warnings.size();
    out->index_used = g.index_used ? 1 : 0;
    out->checksums_verified = g.checksums_verified ? 1 : 0;
    return DS_OK;
  });
}

const char* ds_file_state_name(int32_t state) {
  if (state < DS_STATE_CLEAN || state > DS_STATE_CORRUPT) return nullptr;
  return file_state_name(static_cast<FileState>(state)).data();
}

int ds_reader_warning(const ds_reader* reader, size_t i, int32_t* status, const char** message) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    const auto& w = reader->reader.integrity().warnings;
    if (i >= w.size())
      return capi::fail(make_error(Errc::invalid_argument,
                                   "warning index " + std::to_string(i) + " out of range 0 ... " +
                                       std::to_string(w.size()) + " (exclusive)"));
    if (status) *status = -static_cast<int32_t>(w[i].code);
    if (message) *message = w[i].message.c_str();
    return DS_OK;
  });
}

size_t ds_reader_record_count(const ds_reader* reader) {
  return reader ? reader->records.size() : 0;
}

const ds_record* ds_reader_record(const ds_reader* reader, size_t i) {
  if (!reader || i >= reader->records.size()) return nullptr;
  return &reader->records[i];
}

int ds_reader_find(const ds_reader* reader, const char* name, uint32_t occurrence, int32_t role,
                   uint16_t role_index, const ds_record** out) {
  return capi::guarded([&]() -> int {
    if (!out) return capi::fail_null("out");
    *out = nullptr;
    if (!reader) return capi::fail_null("reader");
    if (!name) return capi::fail_null("name");
    if (role < DS_ROLE_OUTPUT || role > DS_ROLE_OTHER)
      return capi::fail(make_error(Errc::bad_enum, "role is " + std::to_string(role) +
                                                       ", allowed 0 (output) ... 3 (other)"));
    const Record* r =
        reader->reader.find(name, occurrence, static_cast<Role>(role), role_index);
    const ds_record* c = r ? c_view(reader, r) : nullptr;
    if (!c)
      return capi::fail(make_error(
          Errc::not_found, std::string("no tensor '") + name + "' occurrence " +
                               std::to_string(occurrence) + " " +
                               std::string(role_name(static_cast<Role>(role))) + " " +
                               std::to_string(role_index) + " in this file"));
    *out = c;
    return DS_OK;
  });
}

int64_t ds_reader_find_all(const ds_reader* reader, const char* name, const ds_record** out,
                           size_t capacity) {
  return capi::guarded([&]() -> int64_t {
    if (!reader) return capi::fail_null("reader");
    if (!name) return capi::fail_null("name");
    if (!out && capacity > 0) return capi::fail_null("out");
    auto all = reader->reader.find_all(name);
    for (size_t i = 0; i < all.size() && i < capacity; ++i) out[i] = c_view(reader, all[i]);
    return static_cast<int64_t>(all.size());
  });
}

int ds_reader_verify_payload(const ds_reader* reader, const ds_record* record) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    if (!record) return capi::fail_null("record");
    auto r = reader->reader.verify_payload(*record->record);
    return r ? DS_OK : capi::fail(r.error());
  });
}

int ds_reader_check_unchanged(const ds_reader* reader) {
  return capi::guarded([&]() -> int {
    if (!reader) return capi::fail_null("reader");
    auto r = reader->reader.check_unchanged();
    return r ? DS_OK : capi::fail(r.error());
  });
}

int ds_record_get_info(const ds_record* record, ds_record_info* out) {
  return capi::guarded([&]() -> int {
    if (!record) return capi::fail_null("record");
    if (!out) return capi::fail_null("out");
    const Record& r = *record->record;
    const TensorInfo& t = r.info;
    *out = ds_record_info{};
    out->kind = static_cast<int32_t>(r.kind);
    out->position = record->position;
    out->name = t.name.c_str();
    out->name_length = t.name.size();
    out->op_type = t.op_type.c_str();
    out->op_type_length = t.op_type.size();
    out->role = static_cast<int32_t>(t.role);
    out->role_index = t.role_index;
    out->exec_index = t.exec_index;
    out->occurrence = t.occurrence;
    out->dtype = static_cast<int32_t>(t.dtype);
    out->rank = t.shape.size();
    out->shape = t.shape.empty() ? nullptr : t.shape.data();
    out->numel = t.numel();
    out->axes = record->axes.c_str();
    out->axes_length = record->axes.size();
    out->attr_count = t.attrs.size();
    out->encoding = static_cast<int32_t>(t.encoding.kind);
    out->encoding_axis = t.encoding.axis;
    out->scale_count = t.encoding.scales.size();
    out->scales = t.encoding.scales.empty() ? nullptr : t.encoding.scales.data();
    out->zero_points = t.encoding.zero_points.empty() ? nullptr : t.encoding.zero_points.data();
    out->offset = r.offset;
    out->size = r.size;
    out->payload_offset = r.payload_offset;
    out->payload_size = r.payload.size();
    return DS_OK;
  });
}

int ds_record_attr(const ds_record* record, size_t i, const char** key, size_t* key_length,
                   const char** value, size_t* value_length) {
  return capi::guarded([&]() -> int {
    if (!record) return capi::fail_null("record");
    const auto& attrs = record->record->info.attrs;
    if (i >= attrs.size())
      return capi::fail(make_error(Errc::invalid_argument,
                                   "attribute index " + std::to_string(i) +
                                       " out of range 0 ... " + std::to_string(attrs.size()) +
                                       " (exclusive)"));
    if (key) *key = attrs[i].first.c_str();
    if (key_length) *key_length = attrs[i].first.size();
    if (value) *value = attrs[i].second.c_str();
    if (value_length) *value_length = attrs[i].second.size();
    return DS_OK;
  });
}

const char* ds_record_attr_get(const ds_record* record, const char* key) {
  if (!record || !key) return nullptr;
  for (const auto& [k, v] : record->record->info.attrs)
    if (k == key) return v.c_str();
  return nullptr;
}

int ds_record_payload(const ds_record* record, const void** data, uint64_t* size) {
  return capi::guarded([&]() -> int {
    if (!record) return capi::fail_null("record");
    if (data) *data = record->record->payload.data();
    if (size) *size = record->record->payload.size();
    return DS_OK;
  });
}

int ds_record_decode_f32(const ds_record* record, uint64_t first, float* out, size_t count) {
  return capi::guarded([&]() -> int { return decode_to(record, first, out, count); });
}

int ds_record_decode_f64(const ds_record* record, uint64_t first, double* out, size_t count) {
  return capi::guarded([&]() -> int { return decode_to(record, first, out, count); });
}

int ds_record_stats(const ds_record* record, ds_tensor_stats* out) {
  return capi::guarded([&]() -> int {
    if (!record) return capi::fail_null("record");
    if (!out) return capi::fail_null("out");
    const Record& r = *record->record;
    if (r.kind == RecordKind::summary) {
      if (!r.summary())
        return capi::fail(DS_E_INTERNAL, "SUMMARY record '" + r.info.name +
                                             "' has no decoded summary");
      fill_stats(r.summary()->stats, out);
      return DS_OK;
    }
    auto s = compute_stats(r.info, r.payload);
    if (!s) return capi::fail(s.error());
    fill_stats(*s, out);
    return DS_OK;
  });
}

int ds_record_summary(const ds_record* record, ds_summary* out) {
  return capi::guarded([&]() -> int {
    if (!record) return capi::fail_null("record");
    if (!out) return capi::fail_null("out");
    const Record& r = *record->record;
    if (r.kind != RecordKind::summary || !r.summary())
      return capi::fail(make_error(Errc::invalid_argument,
                                   "record '" + r.info.name +
                                       "' is a TENSOR, not a SUMMARY: use ds_record_stats"));
    fill_stats(r.summary()->stats, &out->stats);
    out->projection_seed = r.summary()->projection_seed;
    out->projection_kind = r.summary()->projection_kind;
    out->projection_dim = static_cast<uint32_t>(r.summary()->projection.size());
    out->projection = r.summary()->projection.empty() ? nullptr : r.summary()->projection.data();
    return DS_OK;
  });
}

}  // extern "C"
