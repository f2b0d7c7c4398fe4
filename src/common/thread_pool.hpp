// A small shared thread pool for data-parallel loops: the metric kernels split one large tensor
// into fixed tasks, the comparison engine runs tensor pairs side by side.
//
// Determinism contract: parallel_for(n, fn) calls fn(i) exactly once for every i in [0, n) and
// returns after the last call has returned. Which thread runs which index varies from run to run,
// so fn(i) must write only to state owned by index i; the caller then combines the per-index
// results in index order. What is computed therefore never depends on the thread count.
//
// Nesting is allowed (fn may itself call parallel_for): the calling thread always works on its
// own loop, so a loop never waits for a thread that is waiting on it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace driftscope::detail {

// Threads the machine offers (std::thread::hardware_concurrency, at least 1).
unsigned hardware_threads() noexcept;

// The upper bound on the threads one loop may use; larger requests are clamped to it.
inline constexpr unsigned kMaxPoolThreads = 256;

// Type-erased body: `call(ctx, i)`.
void parallel_for_impl(size_t n, unsigned threads, void* ctx, void (*call)(void*, size_t));

// Runs fn(i) for i in [0, n) on up to `threads` threads, the calling thread included
// (0: hardware_threads()). An exception thrown by fn is rethrown here after the loop ends
// (the first one caught; remaining indices still run).
template <class Fn>
void parallel_for(size_t n, Fn&& fn, unsigned threads = 0) {
  using F = std::remove_reference_t<Fn>;
  parallel_for_impl(n, threads, const_cast<void*>(static_cast<const void*>(&fn)),
                    [](void* ctx, size_t i) { (*static_cast<F*>(ctx))(i); });
}

}  // namespace driftscope::detail
