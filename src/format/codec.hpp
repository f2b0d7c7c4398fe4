// Encoding and validating the variable parts of TDUMP: the file header with its metadata block
// (docs/format.md §2.1, §2.3), TENSOR metas (§3.3) and SUMMARY payloads (§3.6). Writers and
// readers share these functions, so both enforce exactly the same rules and limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "driftscope/error.hpp"
#include "driftscope/reader.hpp"
#include "driftscope/summary.hpp"
#include "driftscope/tensor.hpp"

namespace driftscope::detail {

// Checks a descriptor against every rule of §3.3 and §6 (names, UTF-8, rank, axes, attributes,
// encoding consistency). `base` is the file offset to report, kNoOffset for writers.
Result<void> validate_tensor_info(const TensorInfo& info, uint64_t base = kNoOffset);
// Payload byte count of a tensor (numel × dtype size), or shape_overflow.
Result<uint64_t> tensor_payload_size(const TensorInfo& info, uint64_t base = kNoOffset);

// Serialises a validated descriptor whose exec_index and occurrence are resolved.
Result<std::string> encode_tensor_meta(const TensorInfo& info);
// Parses and validates a TENSOR/SUMMARY meta; `base` is the meta's file offset. On failure
// `name_out` receives the tensor name when it could be read (for corruption reports).
Result<TensorInfo> decode_tensor_meta(std::span<const std::byte> meta, uint64_t base,
                                      std::string* name_out = nullptr);
// The same into `out`, a default-constructed TensorInfo (the readers decode straight into their
// Record: no move of the whole descriptor per record); on failure `out` is partly filled.
Result<void> decode_tensor_meta_into(std::span<const std::byte> meta, uint64_t base, TensorInfo& out,
                                     std::string* name_out = nullptr);

// The file header (§2.1): the header bytes including the padded metadata block.
Result<std::string> encode_header(const KeyValues& metadata, uint64_t salt);
// Validates the header of a whole file image.
Result<FileHeader> decode_header(std::span<const std::byte> file);

std::string encode_summary_payload(const Summary& s);
// Checks in the order of docs/format.md §3.6; `numel` is the element count of the meta's shape.
Result<Summary> decode_summary_payload(std::span<const std::byte> payload, uint64_t base, uint64_t numel);
// The writer's side of §3.6: what decode_summary_payload would refuse; `numel` as above
// (~0 when the shape overflows, which the shape rule reports).
Result<void> validate_summary(const Summary& s, uint64_t numel);

}  // namespace driftscope::detail
