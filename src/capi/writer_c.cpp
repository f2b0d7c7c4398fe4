// C ABI: the streaming writer (include/driftscope/writer.hpp, docs/format.md §5).
#include <cstddef>
#include <span>

#include "capi/capi_internal.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/limits.hpp"

using namespace driftscope;

namespace {

// ds_writer_options of the first release ended at `salt`; drop_behind was appended after it.
constexpr size_t kWriterOptionsFirst = offsetof(ds_writer_options, drop_behind);

Result<WriterOptions> to_writer_options(const ds_writer_options* o) {
  WriterOptions opts;
  if (!o) return opts;
  DRIFTSCOPE_TRY(capi::check_struct_size(o->struct_size, sizeof(ds_writer_options),
                                         {kWriterOptionsFirst}, "ds_writer_options"));
  // Fields past an older caller's struct_size are not there: they keep the C++ defaults.
  const bool has_drop_behind = o->struct_size > kWriterOptionsFirst;
  if (o->metadata_count > limits::kMaxMetadataEntries)
    return make_error(Errc::limit_exceeded,
                      "ds_writer_options.metadata_count is " + std::to_string(o->metadata_count) +
                          ", allowed 0 ... " + std::to_string(limits::kMaxMetadataEntries));
  if (o->metadata_count > 0 && !o->metadata)
    return make_error(Errc::invalid_argument, "ds_writer_options.metadata is NULL with count " +
                                                  std::to_string(o->metadata_count));
  if (o->sync_policy < DS_SYNC_ON_CLOSE || o->sync_policy > DS_SYNC_EVERY_BYTES)
    return make_error(Errc::bad_enum, "ds_writer_options.sync_policy is " +
                                          std::to_string(o->sync_policy) + ", allowed 0 ... 2");
  opts.metadata.reserve(o->metadata_count);
  for (size_t i = 0; i < o->metadata_count; ++i) {
    const ds_kv& kv = o->metadata[i];
    if (!kv.key || !kv.value)
      return make_error(Errc::invalid_argument, "ds_writer_options.metadata[" +
                                                    std::to_string(i) +
                                                    "] has a NULL key or value");
    opts.metadata.emplace_back(kv.key, kv.value);
  }
  if (o->filter) opts.filter = o->filter;
  opts.sync = static_cast<SyncPolicy>(o->sync_policy);
  opts.sync_bytes = o->sync_bytes;
  opts.append = o->append != 0;
  opts.overwrite = o->overwrite != 0;
  opts.background = o->background != 0;
  opts.queue_bytes = o->queue_bytes;
  opts.fixed_salt = o->fixed_salt != 0;
  opts.salt = o->salt;
  if (has_drop_behind) opts.drop_behind = o->drop_behind != 0;
  return opts;
}

int report(const Result<WriteResult>& r, ds_write_result* out) {
  if (!r) return capi::fail(r.error());
  if (out) {
    out->status = static_cast<int32_t>(r->status);
    out->exec_index = r->exec_index;
    out->occurrence = r->occurrence;
    out->offset = r->offset;
  }
  return static_cast<int>(r->status);
}

}  // namespace

extern "C" {

void ds_writer_options_init(ds_writer_options* options) {
  if (!options) return;
  // Defaults come from the C++ struct so the two faces cannot drift apart.
  const WriterOptions d;
  *options = ds_writer_options{};
  options->struct_size = sizeof(ds_writer_options);
  options->sync_policy = static_cast<int32_t>(d.sync);
  options->sync_bytes = d.sync_bytes;
  options->append = d.append ? 1 : 0;
  options->overwrite = d.overwrite ? 1 : 0;
  options->background = d.background ? 1 : 0;
  options->queue_bytes = d.queue_bytes;
  options->fixed_salt = d.fixed_salt ? 1 : 0;
  options->salt = d.salt;
  options->drop_behind = d.drop_behind ? 1 : 0;
}

int ds_writer_open(const char* path, const ds_writer_options* options, ds_writer** out) {
  return capi::guarded([&]() -> int {
    if (!out) return capi::fail_null("out");
    *out = nullptr;
    if (!path) return capi::fail_null("path");
    auto opts = to_writer_options(options);
    if (!opts) return capi::fail(opts.error());
    auto w = Writer::create(path, *opts);
    if (!w) return capi::fail(w.error());
    *out = new ds_writer{std::move(*w)};
    return DS_OK;
  });
}

int ds_writer_write(ds_writer* writer, const ds_tensor_desc* desc, const void* data, size_t size,
                    ds_write_result* result) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    if (!data && size > 0) return capi::fail_null("data");
    auto info = capi::to_tensor_info(desc);
    if (!info) return capi::fail(info.error());
    std::span<const std::byte> payload(static_cast<const std::byte*>(data), data ? size : 0);
    return report(writer->writer->write(*info, payload), result);
  });
}

int ds_writer_write_summary(ds_writer* writer, const ds_tensor_desc* desc,
                            const ds_summary* summary, ds_write_result* result) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    if (!summary) return capi::fail_null("summary");
    if (summary->projection_dim > limits::kMaxProjectionDim)
      return capi::fail(make_error(Errc::limit_exceeded,
                                   "ds_summary.projection_dim is " +
                                       std::to_string(summary->projection_dim) +
                                       ", allowed 0 ... " +
                                       std::to_string(limits::kMaxProjectionDim)));
    if (summary->projection_dim > 0 && !summary->projection)
      return capi::fail_null("ds_summary.projection");
    auto info = capi::to_tensor_info(desc);
    if (!info) return capi::fail(info.error());
    Summary s;
    const ds_tensor_stats& st = summary->stats;
    s.stats = TensorStats{st.count, st.nan_count, st.posinf_count, st.neginf_count,
                          st.zero_count, st.min, st.max, st.mean, st.std, st.l2_norm};
    s.projection_seed = summary->projection_seed;
    s.projection_kind = summary->projection_kind;
    s.projection.assign(summary->projection, summary->projection + summary->projection_dim);
    return report(writer->writer->write_summary(*info, s), result);
  });
}

int ds_writer_write_summarized(ds_writer* writer, const ds_tensor_desc* desc, const void* data,
                               size_t size, uint32_t projection_dim, uint64_t seed,
                               ds_write_result* result) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    if (!data && size > 0) return capi::fail_null("data");
    if (projection_dim > limits::kMaxProjectionDim)
      return capi::fail(make_error(Errc::limit_exceeded,
                                   "projection_dim is " + std::to_string(projection_dim) +
                                       ", allowed 0 ... " +
                                       std::to_string(limits::kMaxProjectionDim)));
    auto info = capi::to_tensor_info(desc);
    if (!info) return capi::fail(info.error());
    // A filtered tensor must not cost a pass over its values (issue 2 §4): ask first.
    if (!writer->writer->wants(info->name)) {
      return report(writer->writer->write_summary(*info, Summary{}), result);
    }
    std::span<const std::byte> payload(static_cast<const std::byte*>(data), data ? size : 0);
    auto summary = summarize(*info, payload, projection_dim, seed);
    if (!summary) return capi::fail(summary.error());
    return report(writer->writer->write_summary(*info, *summary), result);
  });
}

int ds_writer_wants(const ds_writer* writer, const char* name) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    if (!name) return capi::fail_null("name");
    return writer->writer->wants(name) ? 1 : 0;
  });
}

int ds_writer_flush(ds_writer* writer) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    auto r = writer->writer->flush();
    return r ? DS_OK : capi::fail(r.error());
  });
}

int ds_writer_close(ds_writer* writer) {
  return capi::guarded([&]() -> int {
    if (!writer) return capi::fail_null("writer");
    auto r = writer->writer->close();
    return r ? DS_OK : capi::fail(r.error());
  });
}

void ds_writer_free(ds_writer* writer) {
  if (!writer) return;
  // ~Writer closes; an exception escaping a C++ destructor would terminate, but it must not
  // cross the ABI in any case, and the handle is released either way.
  try {
    writer->writer.reset();
  } catch (...) {
  }
  delete writer;
}

uint64_t ds_writer_records_written(const ds_writer* writer) {
  return writer ? writer->writer->records_written() : 0;
}
uint64_t ds_writer_bytes_written(const ds_writer* writer) {
  return writer ? writer->writer->bytes_written() : 0;
}
uint64_t ds_writer_salt(const ds_writer* writer) { return writer ? writer->writer->salt() : 0; }

}  // extern "C"
