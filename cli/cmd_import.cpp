// driftscope import IN.npz|IN.npy|IN.safetensors OUT.tdump (issue 2 §5): a thin caller of
// driftscope::import_file (include/driftscope/interop.hpp), which checks the hostile input.
#include <cerrno>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/filter.hpp"
#include "driftscope/interop.hpp"
#include "util.hpp"

namespace driftscope::cli {
namespace {

struct ImportArgs {
  std::string in;
  std::string out;
  std::string filter;
  std::vector<std::string> meta;
  std::string salt;
  bool quiet = false;
};

// The library's messages start with the path they concern: name that one.
int fail_at(const ImportArgs& a, const Error& e) {
  const std::string& path = e.message.rfind(a.out + ": ", 0) == 0 ? a.out : a.in;
  return fail(path, e);
}

int run_import(const ImportArgs& a) {
  ImportOptions opt;
  if (auto f = Filter::parse(a.filter); !f)
    return fail(fmt::format("--filter: {}", f.error().to_string()));
  opt.filter = a.filter;
  if (!a.salt.empty()) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(a.salt.c_str(), &end, 0);
    if (errno != 0 || !end || *end != '\0')
      return fail(fmt::format("--salt: {} is not a 64-bit number", quote(a.salt)));
    opt.fixed_salt = true;
    opt.salt = v;
  }
  for (const auto& m : a.meta) {
    auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(fmt::format("--meta: {} is not KEY=VALUE", quote(m)));
    opt.metadata.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  auto same = driftscope::refuse_input_as_output(a.out, std::span<const std::string>(&a.in, 1));
  if (!same) return fail(same.error().message);
  auto r = import_file(a.in, a.out, opt);
  if (!r) return fail_at(a, r.error());
  for (const auto& n : r->notes) note(n);
  if (!a.quiet)
    fmt::print(stderr, "driftscope: wrote {}: {} tensors ({} payload bytes) from {} ({}){}\n",
               a.out, r->written, fmt_count(r->payload_bytes), a.in,
               interop_format_name(r->format),
               r->filtered ? fmt::format(", {} filtered out", r->filtered) : std::string());
  return kExitOk;
}

std::function<int()> setup_import(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  auto* sub = app.add_subcommand("import", "Convert a .npz, .npy or .safetensors file to a dump");
  sub->add_option("IN", a->in, "the .npz, .npy or .safetensors file to read")->required();
  sub->add_option("OUT", a->out, "the .tdump file to write (replaced if it exists)")->required();
  sub->add_option("-f,--filter", a->filter, "only tensors matching this filter (docs/filters.md)");
  sub->add_option("-m,--meta", a->meta,
                  "run metadata KEY=VALUE, repeatable (e.g. framework=pytorch backend=cpu)");
  sub->add_option("--salt", a->salt,
                  "fixed file salt (e.g. 0x1) for byte-reproducible output; default random");
  sub->add_flag("-q,--quiet", a->quiet, "do not print the summary on stderr");
  sub->footer(R"HELP(
Turns tensors people already saved into a dump that `driftscope compare` can read. The order
of the input becomes the execution order: the member order of an .npz (the order of the
arguments to numpy.savez), the data order of a .safetensors file. Names are the .npz keys or
the safetensors tensor names; an .npy file gives one tensor named after the file. The run
metadata records source (the input's file name) and source_format, plus the safetensors
"__metadata__" entries and any --meta KEY=VALUE (which win).

The input is treated as hostile: no pickle (object arrays are refused), bounded header sizes
(.npy 64 KiB, safetensors 100 MB), every size and offset checked for overflow and against the
file, zip members stored or deflated only and checked against their CRC-32, safetensors
offsets contiguous and covering the data exactly; only regular files (a FIFO is refused, never
waited on). A bad input fails with exit status 2 and one line naming the member or tensor, the
field and the offset; OUT is then not created and no temporary file is left.

dtypes: float64/32/16, int8..64, uint8..64 and bool from numpy (big-endian and Fortran-order
arrays are converted); F64 F32 F16 BF16 F8_E4M3 F8_E5M2 I8..I64 U8..U64 BOOL from safetensors.

Examples:
  driftscope import activations.npz run.tdump --meta framework=numpy
  driftscope import model.safetensors weights.tdump
  driftscope import logits.npy logits.tdump)HELP");
  return [a] { return run_import(*a); };
}

}  // namespace

DRIFTSCOPE_COMMAND(import, 70, setup_import);

}  // namespace driftscope::cli
