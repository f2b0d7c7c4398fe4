// Checking a record CRC from a checksum of its payload computed elsewhere (the metric kernels
// checksum the payload in parallel while they read it: numerics::PairOptions::crc_ref).
#pragma once

#include <cstdint>

#include "driftscope/reader.hpp"

namespace driftscope::detail {

// The same judgement and error as Reader::verify_payload(rec), given payload_crc = CRC-32 of
// rec.payload: only the frame and meta bytes are read here.
Result<void> verify_payload_crc(const Reader& reader, const Record& rec, uint32_t payload_crc);

}  // namespace driftscope::detail
