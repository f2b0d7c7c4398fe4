// On-disk constants and the record frame of TDUMP v1 (docs/format.md §2–§3). The single place
// where byte offsets of the format appear in C++.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/bytes.hpp"
#include "common/crc32.hpp"

namespace driftscope::detail {

// §2.1
inline constexpr std::array<uint8_t, 8> kFileMagic = {0x89, 'T', 'D', 'U', 'M', 'P', 0x0D, 0x0A};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr uint32_t kByteOrderMark = 0x01020304;
inline constexpr uint32_t kKnownRequiredFeatures = 0;
inline constexpr size_t kFixedHeaderSize = 64;
inline constexpr size_t kHeaderCrcOffset = 60;

namespace hdr {
inline constexpr size_t magic = 0, version_major = 8, version_minor = 10, byte_order = 12,
                        salt = 16, required = 24, optional = 28, header_length = 32,
                        metadata_length = 36, metadata_count = 40, reserved = 44, crc = 60;
}

// §3.1
inline constexpr std::array<uint8_t, 4> kRecordMagic = {0x8A, 'R', 'E', 'C'};
inline constexpr size_t kFrameSize = 48;
inline constexpr uint16_t kFlagSkippable = 1;

namespace frm {
inline constexpr size_t magic = 0, kind = 4, flags = 6, record_length = 8, payload_length = 16,
                        meta_length = 24, reserved = 28, salt = 32, frame_crc = 40,
                        record_crc = 44;
}

// §3.2
inline constexpr uint16_t kKindTensor = 1, kKindSummary = 2, kKindIndex = 3, kKindEnd = 4;

// §3.5, §3.4, §3.6
inline constexpr uint32_t kEndMetaSize = 16;
inline constexpr uint32_t kIndexMetaSize = 24;
inline constexpr uint32_t kIndexEntrySize = 24;
inline constexpr uint32_t kHashFnv1a64 = 1;
inline constexpr size_t kSummaryFixedSize = 112;
inline constexpr size_t kTensorMetaFixedSize = 32;

struct Frame {
  uint16_t kind = 0;
  uint16_t flags = 0;
  uint64_t record_length = 0;
  uint64_t payload_length = 0;
  uint32_t meta_length = 0;
  uint32_t reserved = 0;
  uint64_t salt = 0;
  uint32_t frame_crc = 0;
  uint32_t record_crc = 0;
};

inline constexpr uint64_t payload_start(uint64_t meta_length) noexcept {
  return align64(kFrameSize + meta_length);
}
inline constexpr uint64_t record_length_for(uint64_t meta_length, uint64_t payload_length) noexcept {
  return align64(payload_start(meta_length) + payload_length);
}

inline Frame load_frame(const std::byte* p) noexcept {
  Frame f;
  f.kind = load_le<uint16_t>(p + frm::kind);
  f.flags = load_le<uint16_t>(p + frm::flags);
  f.record_length = load_le<uint64_t>(p + frm::record_length);
  f.payload_length = load_le<uint64_t>(p + frm::payload_length);
  f.meta_length = load_le<uint32_t>(p + frm::meta_length);
  f.reserved = load_le<uint32_t>(p + frm::reserved);
  f.salt = load_le<uint64_t>(p + frm::salt);
  f.frame_crc = load_le<uint32_t>(p + frm::frame_crc);
  f.record_crc = load_le<uint32_t>(p + frm::record_crc);
  return f;
}

// Writes the 48 frame bytes, computing frame_crc; record_crc is stored as given (the caller
// computes it over frame[0..44) ‖ meta ‖ payload with the frame_crc in place).
inline void store_frame(const Frame& f, std::byte* p) noexcept {
  for (size_t i = 0; i < 4; ++i) p[i] = std::byte{kRecordMagic[i]};
  store_le<uint16_t>(p + frm::kind, f.kind);
  store_le<uint16_t>(p + frm::flags, f.flags);
  store_le<uint64_t>(p + frm::record_length, f.record_length);
  store_le<uint64_t>(p + frm::payload_length, f.payload_length);
  store_le<uint32_t>(p + frm::meta_length, f.meta_length);
  store_le<uint32_t>(p + frm::reserved, f.reserved);
  store_le<uint64_t>(p + frm::salt, f.salt);
  store_le<uint32_t>(p + frm::frame_crc, crc32(0, p, frm::frame_crc));
  store_le<uint32_t>(p + frm::record_crc, f.record_crc);
}

}  // namespace driftscope::detail
