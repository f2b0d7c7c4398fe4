#include "common/pages.hpp"

#include <algorithm>
#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

#include "common/thread_pool.hpp"

namespace driftscope::detail {

void release_pages(std::span<const std::byte> bytes) noexcept {
#if defined(MADV_DONTNEED)
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (page == 0 || bytes.size() < page) return;
  uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data());
  uintptr_t end = begin + bytes.size();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
  (void)bytes;
#endif
}

void populate_pages(std::span<const std::byte> bytes) noexcept {
#if defined(MADV_POPULATE_READ)
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (page == 0 || bytes.empty()) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)bytes;
#endif
}

void populate_for_write(void* p, size_t n) noexcept {
#if defined(MADV_POPULATE_WRITE)
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (page == 0 || n < page) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

void populate_for_write(void* p, size_t n, unsigned threads) {
  constexpr size_t kSlice = size_t{16} << 20;
  if (n < 2 * kSlice) return;
  auto* base = static_cast<std::byte*>(p);
  parallel_for((n + kSlice - 1) / kSlice, [&](size_t i) {
    populate_for_write(base + i * kSlice, std::min(kSlice, n - i * kSlice));
  }, threads);
}

}  // namespace driftscope::detail
