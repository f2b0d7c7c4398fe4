// driftscope export FILE OUT.npz: the tensors of a dump as a numpy archive (issue 2 §5).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/reader.hpp"
#include "npz.hpp"
#include "safetensors.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct ExportArgs {
  std::string in;
  std::string out;
  std::string filter;
  bool compress = false;
  bool raw_quantized = false;
  bool quiet = false;
};

// The archive key of a record: its name, plus "[role:index]" unless it is output 0, plus
// "@occurrence" unless it is the first call (so repeated modules keep distinct keys).
std::string key_of(const TensorInfo& t) {
  std::string k = t.name;
  if (t.role != Role::output || t.role_index != 0) k += fmt::format("[{}]", fmt_role(t.role, t.role_index, true));
  if (t.occurrence != 0) k += fmt::format("@{}", t.occurrence);
  return k;
}

int run_export(const ExportArgs& a) {
  auto filter = Filter::parse(a.filter);
  if (!filter) return fail(fmt::format("--filter: {}", filter.error().to_string()));
  const std::string inputs[] = {a.in};
  if (auto same = refuse_input_as_output(a.out, inputs); !same) return fail(same.error().message);
  auto opened = Reader::open(a.in);
  if (!opened) return fail(a.in, opened.error());
  const Reader& r = *opened;
  warn_damage(a.in, r);

  const bool to_st = a.out.size() >= 12 && a.out.compare(a.out.size() - 12, 12, ".safetensors") == 0;
  if (to_st && a.compress)
    return fail("--compress: safetensors files are not compressed; export to .npz to compress");

  // The plan first: safetensors needs every size in its header before the first data byte.
  struct Item {
    const Record* rec;
    std::string key;
    DType dtype;   // as exported
    bool convert;  // decoded to float32 (widened or dequantized)
    uint64_t bytes;
  };
  std::vector<Item> items;
  std::set<std::string> keys;
  std::map<std::string, uint64_t> widened;  // dtype -> tensors exported as float32
  uint64_t summaries = 0, dequantized = 0;
  for (const Record& rec : r.records()) {
    const TensorInfo& t = rec.info;
    if (!filter->accepts(t, t.exec_index)) continue;
    if (rec.kind == RecordKind::summary) {
      ++summaries;
      continue;
    }
    std::string key = key_of(t);
    if (!keys.insert(key).second) {
      warn(fmt::format("{}: skipping a second record with key {} (offset {})", a.in, quote(key),
                       rec.offset));
      continue;
    }
    // numpy has no bfloat16 or fp8: those widen exactly to float32 in an .npz (safetensors
    // has them). Quantized tensors export their real values, scale * (q - zero_point), unless
    // --raw-quantized keeps the codes.
    bool quantized = t.encoding.kind != EncodingKind::raw;
    bool widen = !to_st && npy_descr(t.dtype).empty();
    bool deq = quantized && !a.raw_quantized;
    if (widen) widened[std::string(dtype_name(t.dtype))]++;
    if (deq) ++dequantized;
    bool convert = widen || deq;
    items.push_back({&rec, std::move(key), convert ? DType::f32 : t.dtype, convert,
                     convert ? t.numel() * 4 : rec.payload.size()});
  }

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

  auto out = AtomicOutput::create(a.out, inputs);
  if (!out) return fail(out.error().message);
  if (to_st) {
    std::vector<SafetensorsEntry> entries;
    for (const auto& it : items) entries.push_back({it.key, it.dtype, it.rec->info.shape, it.bytes});
    std::string header = safetensors_header(entries, r.header().metadata);
    std::FILE* f = std::fopen(out->temp_path().c_str(), "wb");
    if (!f) return fail(fmt::format("{}: io_error: cannot create: {}", a.out, std::strerror(errno)));
    auto sink = [&](std::span<const std::byte> d) -> Result<void> {
      if (!d.empty() && std::fwrite(d.data(), 1, d.size(), f) != d.size())
        return make_error(Errc::io_error, fmt::format("cannot write: {}", std::strerror(errno)));
      return {};
    };
    Result<void> st = sink(std::as_bytes(std::span<const char>(header)));
    for (size_t i = 0; st && i < items.size(); ++i) st = emit(items[i], sink);
    bool closed = std::fclose(f) == 0;
    if (!st) {
      if (auto c = r.check_unchanged(); !c) return fail(a.in, c.error());
      return fail(a.out, st.error());
    }
    if (!closed) return fail(fmt::format("{}: io_error: cannot write: {}", a.out, std::strerror(errno)));
  } else {
    auto zw = ZipWriter::create(out->temp_path(), a.compress);
    if (!zw) return fail(a.out, zw.error());
    for (const auto& it : items) {
      std::string header = npy_header(npy_descr(it.dtype), it.rec->info.shape);
      auto step = [&]() -> Result<void> {
        DRIFTSCOPE_TRY((*zw)->begin(it.key + ".npy", header.size() + it.bytes));
        DRIFTSCOPE_TRY((*zw)->write(std::as_bytes(std::span<const char>(header))));
        DRIFTSCOPE_TRY(emit(it, [&](std::span<const std::byte> d) { return (*zw)->write(d); }));
        return (*zw)->end();
      };
      if (auto st = step(); !st) {
        if (auto c = r.check_unchanged(); !c) return fail(a.in, c.error());
        return fail(a.out, st.error());
      }
    }
    if (auto f = (*zw)->finish(); !f) return fail(a.out, f.error());
  }
  if (auto c = r.check_unchanged(); !c) return fail(a.in, c.error());
  if (auto c = out->commit(); !c) return fail(c.error().message);
  if (!a.quiet) {
    for (const auto& [dt, n] : widened)
      note(fmt::format("{} {} tensor{} exported as float32 (numpy has no {}; the conversion is "
                       "exact)", n, dt, n == 1 ? "" : "s", dt));
    if (dequantized)
      note(fmt::format("{} quantized tensor{} exported dequantized as float32 (--raw-quantized "
                       "keeps the integer codes)", dequantized, dequantized == 1 ? "" : "s"));
    if (summaries)
      note(fmt::format("{} summary record{} skipped (light mode stores no values)", summaries,
                       summaries == 1 ? "" : "s"));
    fmt::print(stderr, "driftscope: wrote {}: {} {}\n", a.out, items.size(),
               to_st ? "tensors" : "arrays");
  }
  return kExitOk;
}

std::function<int()> setup_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* sub = app.add_subcommand("export", "Write the tensors of a dump to a .npz or .safetensors file");
  sub->add_option("FILE", a->in, "the .tdump file to read")->required();
  sub->add_option("OUT", a->out,
                  "the .npz (or, by its extension, .safetensors) file to write (replaced if it exists)")
      ->required();
  sub->add_option("-f,--filter", a->filter, "only tensors matching this filter (docs/filters.md)");
  sub->add_flag("-z,--compress", a->compress, "deflate the members (like numpy.savez_compressed)");
  sub->add_flag("--raw-quantized", a->raw_quantized,
                "export quantized tensors as their stored integer codes, not dequantized");
  sub->add_flag("-q,--quiet", a->quiet, "do not print notes and the summary on stderr");
  sub->footer(R"HELP(
Writes one array per tensor, in execution order, loadable with numpy.load (no pickle). The
key is the tensor's name; a record that is not output 0 of its module gets "[role:index]"
appended (e.g. "encoder[input:0]"), one that is not the first call gets "@occurrence" (e.g.
"encoder.layers.0@1").

dtypes: f64 f32 f16 i8..i64 u8..u64 bool keep their dtype. numpy has no bfloat16 or fp8, so
bf16, f8e4m3fn and f8e5m2 tensors are exported as float32 (exactly: every value of those
types is a float32). Quantized tensors are exported dequantized as float32 unless
--raw-quantized. Summary records (light mode) hold no values and are skipped. A note on
stderr says when any of this happened.

OUT ending in .safetensors writes a safetensors file instead: the same keys in the same order,
every dtype kept (BF16, F8_E4M3 and F8_E5M2 included), the run metadata as "__metadata__".

Examples:
  driftscope export run.tdump run.npz
  driftscope export run.tdump layers.npz --filter 'encoder.layers.*' --compress
  driftscope export run.tdump run.safetensors
  python3 -c "import numpy as np; print(np.load('run.npz')['encoder.layers.0'])")HELP");
  return [a] { return run_export(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(export, 60, setup_export);

}  // namespace driftscope::cli
