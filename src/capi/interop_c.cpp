// ds_import / ds_export (include/driftscope.h) over driftscope::import_file / export_file.
#include <string>

#include "capi_internal.hpp"
#include "driftscope/interop.hpp"
#include "driftscope/limits.hpp"

using namespace driftscope;

namespace {

Result<std::optional<InteropFormat>> to_format(int32_t f, const char* field, bool allow_npy) {
  switch (f) {
    case DS_FORMAT_AUTO: return std::optional<InteropFormat>();
    case DS_FORMAT_NPZ: return std::optional<InteropFormat>(InteropFormat::npz);
    case DS_FORMAT_NPY:
      if (allow_npy) return std::optional<InteropFormat>(InteropFormat::npy);
      break;
    case DS_FORMAT_SAFETENSORS: return std::optional<InteropFormat>(InteropFormat::safetensors);
    default: break;
  }
  return make_error(Errc::bad_enum, std::string(field) + " is " + std::to_string(f) +
                                        (allow_npy ? ", allowed 0 ... 3" : ", allowed 0, 1 or 3"));
}

int32_t from_format(InteropFormat f) {
  switch (f) {
    case InteropFormat::npz: return DS_FORMAT_NPZ;
    case InteropFormat::npy: return DS_FORMAT_NPY;
    case InteropFormat::safetensors: return DS_FORMAT_SAFETENSORS;
  }
  return DS_FORMAT_AUTO;
}

Result<ImportOptions> to_import_options(const ds_import_options* o) {
  ImportOptions opts;
  if (!o) return opts;
  DRIFTSCOPE_TRY(capi::check_struct_size(o->struct_size, sizeof(ds_import_options),
                                         "ds_import_options"));
  auto fmt = to_format(o->format, "ds_import_options.format", true);
  DRIFTSCOPE_TRY(fmt);
  opts.format = *fmt;
  if (o->metadata_count > limits::kMaxMetadataEntries)
    return make_error(Errc::limit_exceeded,
                      "ds_import_options.metadata_count is " + std::to_string(o->metadata_count) +
                          ", allowed 0 ... " + std::to_string(limits::kMaxMetadataEntries));
  if (o->metadata_count > 0 && !o->metadata)
    return make_error(Errc::invalid_argument, "ds_import_options.metadata is NULL with count " +
                                                  std::to_string(o->metadata_count));
  for (size_t i = 0; i < o->metadata_count; ++i) {
    const ds_kv& kv = o->metadata[i];
    if (!kv.key || !kv.value)
      return make_error(Errc::invalid_argument, "ds_import_options.metadata[" +
                                                    std::to_string(i) + "] has a NULL key or value");
    opts.metadata.emplace_back(kv.key, kv.value);
  }
  if (o->filter) opts.filter = o->filter;
  opts.fixed_salt = o->fixed_salt != 0;
  opts.salt = o->salt;
  return opts;
}

Result<ExportOptions> to_export_options(const ds_export_options* o) {
  ExportOptions opts;
  if (!o) return opts;
  DRIFTSCOPE_TRY(capi::check_struct_size(o->struct_size, sizeof(ds_export_options),
                                         "ds_export_options"));
  auto fmt = to_format(o->format, "ds_export_options.format", false);
  DRIFTSCOPE_TRY(fmt);
  opts.format = *fmt;
  if (o->filter) opts.filter = o->filter;
  opts.compress = o->compress != 0;
  opts.raw_quantized = o->raw_quantized != 0;
  return opts;
}

}  // namespace

extern "C" {

void ds_import_options_init(ds_import_options* options) {
  if (!options) return;
  *options = ds_import_options{};
  options->struct_size = sizeof(ds_import_options);
  options->format = DS_FORMAT_AUTO;
}

void ds_export_options_init(ds_export_options* options) {
  if (!options) return;
  *options = ds_export_options{};
  options->struct_size = sizeof(ds_export_options);
  options->format = DS_FORMAT_AUTO;
}

int ds_import(const char* in_path, const char* out_path, const ds_import_options* options,
              ds_import_result* result) {
  return capi::guarded([&]() -> int {
    if (!in_path) return capi::fail_null("in_path");
    if (!out_path) return capi::fail_null("out_path");
    auto opts = to_import_options(options);
    if (!opts) return capi::fail(opts.error());
    auto r = import_file(in_path, out_path, *opts);
    if (!r) return capi::fail(r.error());
    if (result) {
      *result = ds_import_result{};
      result->format = from_format(r->format);
      result->written = r->written;
      result->filtered = r->filtered;
      result->payload_bytes = r->payload_bytes;
      result->skipped = r->skipped;
    }
    return DS_OK;
  });
}

int ds_export(const char* in_path, const char* out_path, const ds_export_options* options,
              ds_export_result* result) {
  return capi::guarded([&]() -> int {
    if (!in_path) return capi::fail_null("in_path");
    if (!out_path) return capi::fail_null("out_path");
    auto opts = to_export_options(options);
    if (!opts) return capi::fail(opts.error());
    auto r = export_file(std::string(in_path), std::string(out_path), *opts);
    if (!r) return capi::fail(r.error());
    if (result) {
      *result = ds_export_result{};
      result->format = from_format(r->format);
      result->written = r->written;
      for (const auto& [dt, n] : r->widened) result->widened += n;
      result->dequantized = r->dequantized;
      result->summaries_skipped = r->summaries_skipped;
      result->duplicates_skipped = r->warnings.size();
    }
    return DS_OK;
  });
}

}  // extern "C"
