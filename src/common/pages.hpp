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

// Maps the whole pages inside [p, p + n) writable (MADV_POPULATE_WRITE, Linux 5.14+) without
// changing a byte, so that memory about to be filled is not faulted in one page at a time by
// the thread that fills it; call it from several threads on disjoint slices to spread the
// kernel's page zeroing. A no-op where unsupported.
void populate_for_write(void* p, size_t n) noexcept;
// The same in 16 MiB slices on up to `threads` of the pool's threads (thread_pool.hpp); below
// two slices, nothing (fewer faults than a thread hand-off costs).
void populate_for_write(void* p, size_t n, unsigned threads);

}  // namespace driftscope::detail
