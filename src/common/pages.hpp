// Releasing the resident pages of read-only file-backed maps once they have been read, so that
// comparing dumps larger than memory keeps only the working set resident.
#pragma once

#include <cstddef>
#include <span>

namespace driftscope::detail {

// MADV_DONTNEED on the whole pages inside `bytes` (never a page that reaches outside it, where
// another record may live). Only for read-only file-backed maps: a later access reads the file
// again, so no value can change; on anonymous or caller memory it would zero data.
void release_pages(std::span<const std::byte> bytes) noexcept;

// Maps the pages of `bytes` in one call (MADV_POPULATE_READ, Linux 5.14+) instead of one fault
// per 64 KiB as they are first read; a no-op where unsupported. Never changes what is read.
void populate_pages(std::span<const std::byte> bytes) noexcept;

}  // namespace driftscope::detail
