// Helpers shared by the subcommands: how the CLI reports trouble, formats numbers and tables,
// maps input files and writes output files atomically. Only the public API (include/driftscope)
// is used here: the CLI is a client of the library, never of its internals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/error.hpp"
#include "driftscope/file.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"
#include "driftscope/text.hpp"

namespace driftscope::cli {

// ---- diagnostics: one line each, on stderr; data goes to stdout only --------------------------

// "driftscope: error: <msg>"; returns kExitTrouble so callers can `return fail(...)`.
// Runs `PYTHON -m driftscope <command> args...` by exec (cmd_record.cpp: record, guard, and
// compare --engine ray); returns only on failure (exit 2, one line said why).
int run_python(const std::string& command, const char* help_text, const std::vector<std::string>& args);
int fail(std::string_view message);
// "driftscope: error: <path>: <code>: <message with offset>".
int fail(std::string_view path, const Error& error);
void warn(std::string_view message);  // "driftscope: warning: ..."
void note(std::string_view message);  // "driftscope: note: ..."

// ---- input ------------------------------------------------------------------------------------

// A read-only map of a whole regular file that survives the file shrinking under it
// (driftscope/file.hpp); import reads hostile archives through it.
using InputFile = driftscope::MappedFile;

template <class T>
inline T load_le(const std::byte* p) noexcept {
  // The host is little-endian (static_assert in util.cpp); every format read here is too.
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
inline void put_le(std::string& out, T v) {
  char tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  out.append(tmp, sizeof(T));
}

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) noexcept;
std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) noexcept;

// ---- output -----------------------------------------------------------------------------------

// Output files follow the library's rules (driftscope/file.hpp): AtomicOutput::create(OUT, {IN})
// refuses an OUT that is an input and writes through a temporary file renamed on commit();
// OutputFile and write_output_file do the same for reports (also "-" and streams such as a pipe).
using driftscope::AtomicOutput;
using driftscope::OutputFile;
using driftscope::write_output_file;

// ---- formatting -------------------------------------------------------------------------------

// Shortest of %.6g style: "1.5", "-0.000123", "1.2e+08", "nan", "inf", "-inf".
std::string fmt_num(double v);
// A value of dtype `t` (given widened to double) as the shortest decimal that reads back as the
// same value of `t`: f64 and f32 through std::to_chars, f16/bf16/fp8 by searching the shortest
// decimal inside the value's rounding interval (round to nearest, ties to even). "nan", "inf",
// "-inf", "0", "-0" as fmt_num. Integer dtypes are printed by their callers, not through double.
std::string fmt_exact(double v, DType t);
// "12,345"
std::string fmt_count(uint64_t v);
// "12,345 bytes (12.1 KiB)" — the parenthesis only above 1 KiB.
std::string fmt_bytes(uint64_t v);
// "[2,3,4]" (compact) or "[2, 3, 4]"; "[]" for rank 0.
std::string fmt_shape(const std::vector<uint64_t>& shape, bool compact);
// "output", "input:1", "parameter:0" (index shown when not 0 or when `always_index`).
std::string fmt_role(Role role, uint16_t index, bool always_index = false);
std::string fmt_hex64(uint64_t v);  // "0x0123456789abcdef"
// Quotes a name for messages: 'encoder.layers.0', escaped by printable() (driftscope/text.hpp),
// the one rule for every file-supplied text the CLI prints.
std::string quote(std::string_view s);

// Columns of the terminal stdout goes to: $COLUMNS when set, else the tty's width, else 0
// (unlimited: output piped into a file or a script is never shortened).
size_t terminal_width();
// Display width of UTF-8 text (code points; the names we print are mostly ASCII).
size_t display_width(std::string_view s);
// Shortens to `width` display columns by cutting the middle ("enc…s.31.norm"): both ends of a
// module path carry meaning (the model part and the layer).
std::string elide_middle(std::string_view s, size_t width);

// ---- records ----------------------------------------------------------------------------------

// Statistics of a record: computed from a TENSOR's values, taken from a SUMMARY's payload.
Result<TensorStats> record_stats(const Record& r);
std::string_view kind_name(RecordKind k);
// Warns on stderr when `r` is cut or corrupt, naming what was kept.
void warn_damage(const std::string& file, const Reader& r);
// "bad_record_checksum in tensor 'x': record_crc is ..., computed ... (at offset 172)"
std::string corruption_text(const Integrity& in);

}  // namespace driftscope::cli
