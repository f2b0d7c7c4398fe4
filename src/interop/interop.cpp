// import_file / export_file (include/driftscope/interop.hpp): the conversions behind
// `driftscope import` and `driftscope export`, the C ABI's ds_import/ds_export and Python's
// driftscope.import_file/export_file.
#include "driftscope/interop.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "common/out_file.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/limits.hpp"
#include "driftscope/writer.hpp"
#include "interop/npz.hpp"
#include "interop/safetensors.hpp"
#include "interop/quote.hpp"

namespace driftscope {

using interop::quote;

std::string_view interop_format_name(InteropFormat f) noexcept {
  switch (f) {
    case InteropFormat::npz: return "npz";
    case InteropFormat::npy: return "npy";
    case InteropFormat::safetensors: return "safetensors";
  }
  return "?";
}

namespace {

// Messages name the file they concern, once.
Error at(const std::string& path, Error e) {
  if (e.message.compare(0, path.size() + 2, path + ": ") != 0)
    e.message = fmt::format("{}: {}", path, e.message);
  return e;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::optional<InteropFormat> detect(std::span<const std::byte> b, std::string_view path) {
  auto starts = [&](std::string_view magic) {
    return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
  };
  if (starts("PK\x03\x04") || starts("PK\x05\x06")) return InteropFormat::npz;
  if (starts("\x93NUMPY")) return InteropFormat::npy;
  if (interop::looks_like_safetensors(b)) return InteropFormat::safetensors;
  // Unrecognisable content: trust the extension so the error names the format's problem.
  auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".npz") return InteropFormat::npz;
  if (ext == ".npy") return InteropFormat::npy;
  if (ext == ".safetensors") return InteropFormat::safetensors;
  return std::nullopt;
}

}  // namespace

Result<ImportResult> import_file(const std::string& in, const std::string& out,
                                 const ImportOptions& options) {
  WriterOptions wopt;
  if (auto f = Filter::parse(options.filter); !f) return std::move(f).error();
  wopt.filter = options.filter;
  wopt.fixed_salt = options.fixed_salt;
  wopt.salt = options.salt;
  const std::string inputs[] = {in};
  DRIFTSCOPE_TRY(refuse_input_as_output(out, inputs));
  auto file = MappedFile::open(in);
  if (!file) return at(in, std::move(file).error());
  auto bytes = file->bytes();
  // A parse error may come from pages that read as zeros because the file shrank while mapped
  // (driftscope/file.hpp): then the change is the error to report, not the bytes it left.
  auto bad_input = [&](Error e) {
    if (auto c = file->check_unchanged(); !c) return at(in, std::move(c).error());
    return at(in, std::move(e));
  };
  auto format = options.format ? options.format : detect(bytes, in);
  if (!format)
    return make_error(Errc::invalid_argument,
                      fmt::format("{}: not an .npz, .npy or .safetensors file", in));

  ImportResult result;
  result.format = *format;
  // Metadata: where the tensors came from, the safetensors header's own metadata, then the
  // caller's (which wins).
  // Found through a hash map: a safetensors "__metadata__" may hold any number of keys (the
  // writer refuses more than the format's limit, but only after they were all merged here).
  std::unordered_map<std::string, size_t> meta_at;
  auto set_meta = [&](const std::string& k, const std::string& v) {
    auto [it, fresh] = meta_at.emplace(k, wopt.metadata.size());
    if (fresh) wopt.metadata.emplace_back(k, v);
    else wopt.metadata[it->second].second = v;
  };
  set_meta("source", std::filesystem::path(in).filename().string());
  set_meta("source_format", std::string(interop_format_name(*format)));
  std::optional<interop::SafetensorsFile> st;
  std::optional<interop::ZipReader> zip;
  switch (*format) {
    case InteropFormat::safetensors: {
      auto p = interop::parse_safetensors(bytes);
      if (!p) return bad_input(std::move(p).error());
      st = std::move(*p);
      for (const auto& [k, v] : st->metadata) set_meta(k, v);
      break;
    }
    case InteropFormat::npz: {
      auto z = interop::ZipReader::open(bytes);
      if (!z) return bad_input(std::move(z).error());
      zip = std::move(*z);
      break;
    }
    case InteropFormat::npy: break;
  }
  for (const auto& [k, v] : options.metadata) set_meta(k, v);
  // Said here, naming the input whose metadata it is, rather than by the writer about OUT.
  const size_t entries = wopt.metadata.size() + (meta_at.count("writer") ? 0 : 1);  // + "writer"
  if (entries > limits::kMaxMetadataEntries)
    return make_error(Errc::limit_exceeded,
                      fmt::format("{}: {} run metadata entries (source, source_format, "
                                  "__metadata__ and the options), a dump holds at most {}",
                                  in, entries, limits::kMaxMetadataEntries));

  // Every return below destroys `tmp`, which removes the temporary file unless committed.
  auto tmp = AtomicOutput::create(out, inputs);
  DRIFTSCOPE_TRY(tmp);
  auto w = Writer::create(tmp->temp_path(), wopt);
  if (!w) return at(out, std::move(w).error());
  auto put = [&](const std::string& name, DType dtype, const std::vector<uint64_t>& shape,
                 std::span<const std::byte> data) -> Result<void> {
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = shape;
    auto res = (*w)->write(t, data);
    if (!res) {
      Error e = std::move(res).error();
      e.message = fmt::format("{}: tensor {}: {}", in, quote(name), e.message);
      return e;
    }
    if (res->status == WriteStatus::written) {
      ++result.written;
      result.payload_bytes += data.size();
    } else {
      ++result.filtered;
    }
    return {};
  };

  if (st) {
    // Data-buffer order is the order the tensors were saved in: it becomes execution order.
    for (const auto& t : st->tensors) DRIFTSCOPE_TRY(put(t.name, t.dtype, t.shape, t.data));
  } else if (zip) {
    std::vector<std::byte> inflated;
    for (const auto& m : zip->members()) {
      constexpr std::string_view kExt = ".npy";
      if (m.name.size() <= kExt.size() || !ends_with(m.name, kExt)) {
        ++result.skipped;
        result.notes.push_back(
            fmt::format("{}: skipping member {} (not a .npy array)", in, quote(m.name)));
        continue;
      }
      auto data = zip->read(m, inflated);
      if (!data) return bad_input(std::move(data).error());
      std::string what = fmt::format("member {}", quote(m.name));
      auto arr = m.method == 0 ? interop::parse_npy(*data, what)
                               : interop::parse_npy(std::move(inflated), what);
      if (!arr) {
        Error e = std::move(arr).error();
        // Offsets inside a member are relative to it; make them file offsets.
        if (e.offset != kNoOffset) {
          std::string msg = e.message.substr(0, e.message.rfind(" (at offset"));
          e = m.method == 0
                  ? make_error(e.code, msg, m.data_offset + e.offset)
                  : make_error(e.code, fmt::format("{} (at byte {} of the inflated member)", msg,
                                                   e.offset));
        }
        return bad_input(std::move(e));
      }
      std::string name = m.name.substr(0, m.name.size() - kExt.size());
      DRIFTSCOPE_TRY(put(name, arr->dtype, arr->shape, arr->data));
      inflated = std::vector<std::byte>();
    }
  } else {
    auto arr = interop::parse_npy(bytes, "array");
    if (!arr) return bad_input(std::move(arr).error());
    std::string name = std::filesystem::path(in).stem().string();
    DRIFTSCOPE_TRY(put(name, arr->dtype, arr->shape, arr->data));
  }
  if (auto c = (*w)->close(); !c) return at(out, std::move(c).error());
  // A writer appending to or rewriting the input while we read it: what we copied may be a mix.
  DRIFTSCOPE_TRY(file->check_unchanged());
  DRIFTSCOPE_TRY(tmp->commit());
  return result;
}

std::string export_key(const TensorInfo& t) {
  std::string k = t.name;
  if (t.role != Role::output || t.role_index != 0)
    k += fmt::format("[{}:{}]", role_name(t.role), t.role_index);
  if (t.occurrence != 0) k += fmt::format("@{}", t.occurrence);
  return k;
}

Result<ExportResult> export_file(const Reader& r, const std::string& out,
                                 const ExportOptions& options) {
  auto filter = Filter::parse(options.filter);
  if (!filter) return std::move(filter).error();
  InteropFormat format = options.format.value_or(
      ends_with(out, ".safetensors") ? InteropFormat::safetensors : InteropFormat::npz);
  if (format == InteropFormat::npy)
    return make_error(Errc::invalid_argument,
                      "export writes .npz or .safetensors; an .npy file holds one array");
  const bool to_st = format == InteropFormat::safetensors;
  if (to_st && options.compress)
    return make_error(Errc::invalid_argument,
                      "--compress: safetensors files are not compressed; export to .npz to compress");

  ExportResult result;
  result.format = format;
  // Execution order, as the docs promise: records are in file order, which an appended session
  // or a multi-threaded producer can make differ from exec_index. Stable: file order breaks ties.
  std::span<const Record> records = r.records();
  std::vector<size_t> order(records.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return records[a].info.exec_index < records[b].info.exec_index;
  });

  // The plan first: safetensors needs every size in its header before the first data byte.
  struct Item {
    const Record* rec;
    std::string key;
    DType dtype;   // as exported
    bool convert;  // decoded to float32 (widened or dequantized)
    uint64_t bytes;
  };
  std::vector<Item> items;
  std::unordered_set<std::string> keys;
  std::map<std::string, uint64_t> widened;
  for (size_t i : order) {
    const Record& rec = records[i];
    const TensorInfo& t = rec.info;
    if (!filter->accepts(t, t.exec_index)) continue;
    if (rec.kind == RecordKind::summary) {
      ++result.summaries_skipped;
      continue;
    }
    std::string key = export_key(t);
    if (!to_st && key.find('\0') != std::string::npos)
      return make_error(Errc::unsupported,
                        fmt::format("tensor {} (record at offset {}): its name holds a NUL byte, "
                                    "which an .npz member name cannot (zip readers cut the name "
                                    "there); export to .safetensors or filter it out",
                                    quote(t.name), rec.offset));
    if (!keys.insert(key).second) {
      result.warnings.push_back(fmt::format("skipping a second record with key {} (offset {})",
                                            quote(key), rec.offset));
      continue;
    }
    // numpy has no bfloat16 or fp8: those widen exactly to float32 in an .npz (safetensors
    // has them). Quantized tensors export their real values, scale * (q - zero_point), unless
    // raw_quantized keeps the codes.
    bool quantized = t.encoding.kind != EncodingKind::raw;
    bool widen = !to_st && interop::npy_descr(t.dtype).empty();
    bool deq = quantized && !options.raw_quantized;
    if (widen) widened[std::string(dtype_name(t.dtype))]++;
    if (deq) ++result.dequantized;
    bool convert = widen || deq;
    items.push_back({&rec, std::move(key), convert ? DType::f32 : t.dtype, convert,
                     convert ? t.numel() * 4 : rec.payload.size()});
  }
  result.widened.assign(widened.begin(), widened.end());

  std::vector<float> buf;
  auto emit = [&](const Item& it, auto&& sink) -> Result<void> {
    const Record& rec = *it.rec;
    if (!it.convert) return sink(rec.payload);
    constexpr uint64_t kChunk = 1 << 16;
    const uint64_t numel = rec.info.numel();
    buf.resize(static_cast<size_t>(std::min(numel, kChunk)));
    for (uint64_t first = 0; first < numel; first += kChunk) {
      std::span<float> part(buf.data(), static_cast<size_t>(std::min(kChunk, numel - first)));
      DRIFTSCOPE_TRY(decode(rec.info, rec.payload, first, part));
      DRIFTSCOPE_TRY(sink(std::as_bytes(std::span<const float>(part))));
    }
    return {};
  };

  // Every return below destroys `tmp`, which removes the temporary file unless committed.
  auto tmp = AtomicOutput::create(out);
  DRIFTSCOPE_TRY(tmp);
  if (to_st) {
    std::vector<interop::SafetensorsEntry> entries;
    entries.reserve(items.size());
    for (const auto& it : items) entries.push_back({it.key, it.dtype, it.rec->info.shape, it.bytes});
    auto header = interop::safetensors_header(entries, r.header().metadata);
    if (!header) return at(out, std::move(header).error());
    auto f = detail::OutFile::create(tmp->temp_path(), /*overwrite=*/true);
    if (!f) return at(out, std::move(f).error());
    uint64_t offset = 0;
    auto sink = [&](std::span<const std::byte> d) -> Result<void> {
      DRIFTSCOPE_TRY(f->pwrite_all(d.data(), d.size(), offset));
      offset += d.size();
      return {};
    };
    Result<void> st = sink(std::as_bytes(std::span<const char>(*header)));
    for (size_t i = 0; st && i < items.size(); ++i) st = emit(items[i], sink);
    if (!st) return at(out, std::move(st).error());
    if (auto c = f->close(); !c) return at(out, std::move(c).error());
  } else {
    auto zw = interop::ZipWriter::create(tmp->temp_path(), options.compress);
    if (!zw) return at(out, std::move(zw).error());
    for (const auto& it : items) {
      std::string header = interop::npy_header(interop::npy_descr(it.dtype), it.rec->info.shape);
      auto step = [&]() -> Result<void> {
        DRIFTSCOPE_TRY((*zw)->begin(it.key + ".npy", header.size() + it.bytes));
        DRIFTSCOPE_TRY((*zw)->write(std::as_bytes(std::span<const char>(header))));
        DRIFTSCOPE_TRY(emit(it, [&](std::span<const std::byte> d) { return (*zw)->write(d); }));
        return (*zw)->end();
      };
      if (auto s = step(); !s) return at(out, std::move(s).error());
    }
    if (auto f = (*zw)->finish(); !f) return at(out, std::move(f).error());
  }
  // Values read from a dump that shrank meanwhile may be zeros (driftscope/file.hpp).
  DRIFTSCOPE_TRY(r.check_unchanged());
  DRIFTSCOPE_TRY(tmp->commit());
  result.written = items.size();
  return result;
}

Result<ExportResult> export_file(const std::string& in, const std::string& out,
                                 const ExportOptions& options) {
  const std::string inputs[] = {in};
  DRIFTSCOPE_TRY(refuse_input_as_output(out, inputs));
  auto r = Reader::open(in);
  if (!r) return at(in, std::move(r).error());
  return export_file(*r, out, options);
}

}  // namespace driftscope
