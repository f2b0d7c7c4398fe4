// driftscope — converting between TDUMP and the files other tools save tensors in.
//
// import_file reads a numpy .npz or .npy file or a safetensors file into a new dump; export_file
// writes the tensors of a dump as .npz (loadable with numpy.load, no pickle) or .safetensors.
// Inputs are hostile: nothing is allocated from a size field before it is checked against the
// file, no pickle, bounded headers (.npy 64 KiB, safetensors 100 MB), zip members stored or
// deflated only and CRC-checked, safetensors offsets contiguous and covering the data exactly.
// Work is linear in the input (a header of n tensors costs O(n)).
//
// Errors use the library's Result/Errc: bad_npz and bad_safetensors for a malformed input,
// io_error, invalid_argument (options), unsupported (a tensor the output format cannot hold).
// Messages start with the path they concern ("in.npz: member 'x.npy': ..."). OUT is written to a
// temporary file next to it and renamed into place only on success: on any failure nothing is
// left behind and an existing OUT is untouched. Names, order and dtypes: docs/cli.md (import,
// export).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driftscope/api.h"
#include "driftscope/error.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope {

enum class InteropFormat : uint8_t { npz, npy, safetensors };
// "npz", "npy", "safetensors".
DS_API std::string_view interop_format_name(InteropFormat f) noexcept;

struct ImportOptions {
  // nullopt: recognised by content (zip, \x93NUMPY, safetensors header), then by extension.
  std::optional<InteropFormat> format;
  std::string filter;   // filter syntax (docs/filters.md); empty imports everything
  // Run metadata, applied after "source", "source_format" and safetensors' "__metadata__"
  // (a key given here replaces theirs).
  KeyValues metadata;
  bool fixed_salt = false;  // deterministic output (tests, golden files)
  uint64_t salt = 0;
};

struct ImportResult {
  InteropFormat format = InteropFormat::npz;
  uint64_t written = 0;        // tensors recorded
  uint64_t filtered = 0;       // tensors the filter refused
  uint64_t payload_bytes = 0;  // element bytes of the recorded tensors
  uint64_t skipped = 0;        // npz members that are not .npy arrays
  std::vector<std::string> notes;  // one line per skipped member, naming it
};

// Converts IN to the dump OUT (replaced if it exists). The input order becomes the execution
// order: npz member order, safetensors data order; an .npy file is one tensor named after it.
DS_API Result<ImportResult> import_file(const std::string& in, const std::string& out,
                                 const ImportOptions& options = {});

struct ExportOptions {
  // nullopt: safetensors when OUT ends in ".safetensors", else npz. npy is invalid_argument.
  std::optional<InteropFormat> format;
  std::string filter;          // only records this filter accepts
  bool compress = false;       // deflate npz members (numpy.savez_compressed); not for safetensors
  bool raw_quantized = false;  // quantized tensors as their integer codes, not dequantized
};

struct ExportResult {
  InteropFormat format = InteropFormat::npz;
  uint64_t written = 0;  // arrays / tensors in OUT
  // dtype name -> tensors exported as float32 because the format lacks the dtype (npz: bf16, fp8)
  std::vector<std::pair<std::string, uint64_t>> widened;
  uint64_t dequantized = 0;        // quantized tensors exported as float32 values
  uint64_t summaries_skipped = 0;  // light-mode records (they hold no values)
  std::vector<std::string> warnings;  // records left out because their key repeats an earlier one
};

// The key of a record in an exported file: its name, "[role:index]" unless it is output 0,
// "@occurrence" unless it is the first call ("encoder[input:0]", "encoder.layers.0@1"). The
// .npz member is the key plus ".npy".
DS_API std::string export_key(const TensorInfo& t);

// Writes the TENSOR records of `reader` that pass the filter to OUT, in execution order
// (exec_index; file order among equal indices). A key that repeats an earlier one is left out
// with a warning. npz cannot hold a NUL in a member name (zip readers cut the name there): such
// a record is `unsupported`, naming it. The caller makes sure OUT is not the reader's file.
DS_API Result<ExportResult> export_file(const Reader& reader, const std::string& out,
                                 const ExportOptions& options = {});
// The same from a path; refuses OUT naming the same file as IN (also through links).
DS_API Result<ExportResult> export_file(const std::string& in, const std::string& out,
                                 const ExportOptions& options = {});

}  // namespace driftscope
