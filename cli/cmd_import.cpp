// driftscope import IN.npz|IN.npy|IN.safetensors OUT.tdump (issue 2 §5). The input is hostile:
// see npz.hpp and safetensors.hpp for what is checked before any byte of it is used.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "driftscope/writer.hpp"
#include "npz.hpp"
#include "safetensors.hpp"
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

enum class Format { npz, npy, safetensors };

std::optional<Format> detect(std::span<const std::byte> b, std::string_view path) {
  auto starts = [&](std::string_view magic) {
    return b.size() >= magic.size() &&
           std::memcmp(b.data(), magic.data(), magic.size()) == 0;
  };
  if (starts("PK\x03\x04") || starts("PK\x05\x06")) return Format::npz;
  if (starts("\x93NUMPY")) return Format::npy;
  if (looks_like_safetensors(b)) return Format::safetensors;
  // Unrecognisable content: trust the extension so the error names the format's problem.
  auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".npz") return Format::npz;
  if (ext == ".npy") return Format::npy;
  if (ext == ".safetensors") return Format::safetensors;
  return std::nullopt;
}

std::string_view format_name(Format f) {
  switch (f) {
    case Format::npz: return "npz";
    case Format::npy: return "npy";
    case Format::safetensors: return "safetensors";
  }
  return "?";
}

int run_import(const ImportArgs& a) {
  WriterOptions opt;
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
  const std::string inputs[] = {a.in};
  if (auto same = refuse_input_as_output(a.out, inputs); !same) return fail(same.error().message);
  auto file = InputFile::open(a.in);
  if (!file) return fail(a.in, file.error());
  // Whatever a parser says about zeros read from an input cut under us, the cut is the error.
  auto fail_in = [&](const Error& e) {
    if (auto c = file->check_unchanged(); !c) return fail(a.in, c.error());
    return fail(a.in, e);
  };
  auto bytes = file->bytes();
  auto format = detect(bytes, a.in);
  if (!format) {
    if (auto c = file->check_unchanged(); !c) return fail(a.in, c.error());
    return fail(fmt::format("{}: invalid_argument: not an .npz, .npy or .safetensors file",
                            a.in));
  }

  // Metadata: where the tensors came from, the safetensors header's own metadata, then --meta.
  auto set_meta = [&](const std::string& k, const std::string& v) {
    for (auto& kv : opt.metadata)
      if (kv.first == k) {
        kv.second = v;
        return;
      }
    opt.metadata.emplace_back(k, v);
  };
  set_meta("source", std::filesystem::path(a.in).filename().string());
  set_meta("source_format", std::string(format_name(*format)));
  std::optional<SafetensorsFile> st;
  std::optional<ZipReader> zip;
  switch (*format) {
    case Format::safetensors: {
      auto p = parse_safetensors(bytes);
      if (!p) return fail_in(p.error());
      st = std::move(*p);
      for (const auto& [k, v] : st->metadata) set_meta(k, v);
      break;
    }
    case Format::npz: {
      auto z = ZipReader::open(bytes);
      if (!z) return fail_in(z.error());
      zip = std::move(*z);
      break;
    }
    case Format::npy: break;
  }
  for (const auto& m : a.meta) {
    auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(fmt::format("--meta: {} is not KEY=VALUE", quote(m)));
    set_meta(m.substr(0, eq), m.substr(eq + 1));
  }

  auto out = AtomicOutput::create(a.out, inputs);
  if (!out) return fail(out.error().message);
  auto w = Writer::create(out->temp_path(), opt);
  if (!w) return fail(a.out, w.error());
  uint64_t written = 0, filtered = 0, bytes_out = 0;
  auto put = [&](const std::string& name, DType dtype, const std::vector<uint64_t>& shape,
                 std::span<const std::byte> data) -> Result<void> {
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = shape;
    auto res = (*w)->write(t, data);
    if (!res) {
      Error e = std::move(res).error();
      e.message = fmt::format("tensor {}: {}", quote(name), e.message);
      return e;
    }
    if (res->status == WriteStatus::written) {
      ++written;
      bytes_out += data.size();
    } else {
      ++filtered;
    }
    return {};
  };

  if (st) {
    // Data-buffer order is the order the tensors were saved in: it becomes execution order.
    for (const auto& t : st->tensors)
      if (auto r = put(t.name, t.dtype, t.shape, t.data); !r) return fail_in(r.error());
  } else if (zip) {
    std::vector<std::byte> inflated;
    for (const auto& m : zip->members()) {
      constexpr std::string_view kExt = ".npy";
      if (m.name.size() <= kExt.size() || m.name.compare(m.name.size() - kExt.size(), kExt.size(), kExt) != 0) {
        note(fmt::format("{}: skipping member {} (not a .npy array)", a.in, quote(m.name)));
        continue;
      }
      auto data = zip->read(m, inflated);
      if (!data) return fail_in(data.error());
      std::string what = fmt::format("member {}", quote(m.name));
      auto arr = m.method == 0 ? parse_npy(*data, what) : parse_npy(std::move(inflated), what);
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
        return fail_in(e);
      }
      std::string name = m.name.substr(0, m.name.size() - kExt.size());
      if (auto r = put(name, arr->dtype, arr->shape, arr->data); !r) return fail_in(r.error());
      inflated = std::vector<std::byte>();
    }
  } else {
    auto arr = parse_npy(bytes, "array");
    if (!arr) return fail_in(arr.error());
    std::string name = std::filesystem::path(a.in).stem().string();
    if (auto r = put(name, arr->dtype, arr->shape, arr->data); !r) return fail_in(r.error());
  }
  if (auto c = (*w)->close(); !c) return fail(a.out, c.error());
  // Zeros read from an input cut under us must not become a dump (the temporary file goes).
  if (auto c = file->check_unchanged(); !c) return fail(a.in, c.error());
  if (auto c = out->commit(); !c) return fail(c.error().message);
  if (!a.quiet)
    fmt::print(stderr, "driftscope: wrote {}: {} tensors ({} payload bytes) from {} ({}){}\n",
               a.out, written, fmt_count(bytes_out), a.in, format_name(*format),
               filtered ? fmt::format(", {} filtered out", filtered) : std::string());
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
offsets contiguous and covering the data exactly. A bad input fails with exit status 2 and
one line naming the member or tensor, the field and the offset; OUT is then not created.

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
