// driftscope — the format's limits (docs/format.md §6). Writers and readers enforce the same
// numbers from this one header, so a file a writer produced is never refused by a reader.
#pragma once

#include <cstddef>
#include <cstdint>

namespace driftscope::limits {

inline constexpr uint32_t kMaxHeaderLength = 1u << 20;
inline constexpr uint32_t kMaxMetadataEntries = 1024;
inline constexpr uint32_t kMaxKeyLength = 256;
inline constexpr uint32_t kMaxValueLength = 65536;
inline constexpr uint32_t kMaxMetaLength = 1u << 20;
inline constexpr uint32_t kMaxNameLength = 4096;
inline constexpr uint32_t kMaxOpTypeLength = 256;
inline constexpr uint32_t kMaxAxesLength = 1024;
inline constexpr uint32_t kMaxAttributes = 256;
inline constexpr uint32_t kMaxRank = 16;
inline constexpr uint64_t kMaxPayloadLength = uint64_t{1} << 48;
inline constexpr uint32_t kMaxProjectionDim = 4096;
inline constexpr uint64_t kMaxIndexEntries = 0xFFFFFFFFull;

}  // namespace driftscope::limits
