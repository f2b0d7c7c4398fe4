// driftscope export FILE OUT.npz|OUT.safetensors (issue 2 §5): a thin caller of
// driftscope::export_file (include/driftscope/interop.hpp).
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/interop.hpp"
#include "driftscope/reader.hpp"
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

int run_export(const ExportArgs& a) {
  auto filter = Filter::parse(a.filter);
  if (!filter) return fail(fmt::format("--filter: {}", filter.error().to_string()));
  auto same = driftscope::refuse_input_as_output(a.out, std::span<const std::string>(&a.in, 1));
  if (!same) return fail(same.error().message);
  auto opened = Reader::open(a.in);
  if (!opened) return fail(a.in, opened.error());
  warn_damage(a.in, *opened);

  ExportOptions opt;
  opt.filter = a.filter;
  opt.compress = a.compress;
  opt.raw_quantized = a.raw_quantized;
  auto r = export_file(*opened, a.out, opt);
  if (!r) {
    const Error& e = r.error();
    if (e.code == Errc::invalid_argument) return fail(e.message);  // an option, not a file
    return fail(e.message.rfind(a.out + ": ", 0) == 0 ? a.out : a.in, e);
  }
  for (const auto& w : r->warnings) warn(fmt::format("{}: {}", a.in, w));
  if (!a.quiet) {
    for (const auto& [dt, n] : r->widened)
      note(fmt::format("{} {} tensor{} exported as float32 (numpy has no {}; the conversion is "
                       "exact)", n, dt, n == 1 ? "" : "s", dt));
    if (r->dequantized)
      note(fmt::format("{} quantized tensor{} exported dequantized as float32 (--raw-quantized "
                       "keeps the integer codes)", r->dequantized, r->dequantized == 1 ? "" : "s"));
    if (r->summaries_skipped)
      note(fmt::format("{} summary record{} skipped (light mode stores no values)",
                       r->summaries_skipped, r->summaries_skipped == 1 ? "" : "s"));
    fmt::print(stderr, "driftscope: wrote {}: {} {}\n", a.out, r->written,
               r->format == InteropFormat::safetensors ? "tensors" : "arrays");
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

Execution order is exec_index order (file order among equal indices). Two records with the
same key: the first is kept, later ones are skipped with a warning. An .npz member name cannot
hold NUL (zip readers cut it there): such a name fails the export; .safetensors keeps it.

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
