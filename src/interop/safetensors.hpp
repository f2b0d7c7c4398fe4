// safetensors files (https://github.com/huggingface/safetensors), read as hostile input.
//
// Layout: u64 little-endian header size N, N bytes of JSON header, then the data buffer. The
// header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data buffer) plus an optional "__metadata__" string map. Validation follows
// safetensors' own Metadata::validate: N bounded (100 MB) and inside the file, every shape
// product and byte size computed with checked arithmetic, offsets contiguous from 0 with no
// holes or overlaps once sorted, and the last tensor ending exactly at the end of the file.
// Failures are Errc::bad_safetensors naming the tensor and the field. Parsing is linear in the
// header size (a streaming SAX pass; no JSON tree is kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "driftscope/dtype.hpp"
#include "driftscope/error.hpp"

namespace driftscope::interop {

// safetensors' MAX_HEADER_SIZE.
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;                // offsets in the data buffer
  uint64_t end = 0;
  std::span<const std::byte> data;   // into the caller's bytes
};

struct SafetensorsFile {
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", header order
  std::vector<SafetensorsTensor> tensors;                     // in data-buffer order
  uint64_t header_size = 0;
};

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes);

// safetensors' name of a dtype ("F32", "BF16", "F8_E4M3"); every TDUMP dtype has one.
std::string_view safetensors_dtype(DType t) noexcept;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};
// The 8-byte size and the JSON header for tensors stored back to back in this order, with
// "__metadata__" from `metadata`; padded with spaces to a multiple of 8 so the data buffer
// starts 8-byte aligned, as the safetensors library writes it. Linear in the number of entries.
// Fails (bad_utf8) only when a name or metadata string is not UTF-8, which JSON cannot hold.
Result<std::string> safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::vector<std::pair<std::string, std::string>>& metadata);

// True when the bytes look like a safetensors file (plausible header size, then '{').
bool looks_like_safetensors(std::span<const std::byte> bytes);

}  // namespace driftscope::interop
