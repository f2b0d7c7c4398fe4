// The shared thread pool (src/common/thread_pool.hpp) that the metric kernels split work over.
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/thread_pool.hpp"

namespace driftscope::detail {
namespace {

TEST(ThreadPool, CallsEveryIndexExactlyOnce) {
  for (unsigned threads : {0u, 1u, 2u, 8u, 300u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> hits(n);
      parallel_for(n, [&](size_t i) { hits[i].fetch_add(1); }, threads);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i << " threads=" << threads;
    }
  }
}

TEST(ThreadPool, UsesSeveralThreadsWhenAsked) {
  std::mutex m;
  std::vector<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Each call waits (bounded) until 4 calls are in flight, which needs 4 distinct threads.
  parallel_for(
      4,
      [&](size_t) {
        arrived.fetch_add(1);
        for (int spin = 0; spin < 2000 && arrived.load() < 4; ++spin)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard<std::mutex> lock(m);
        ids.push_back(std::this_thread::get_id());
      },
      4);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), 4);
}

TEST(ThreadPool, NestedLoopsComplete) {
  std::vector<std::atomic<int>> hits(16 * 100);
  parallel_for(
      16,
      [&](size_t i) {
        parallel_for(100, [&](size_t j) { hits[i * 100 + j].fetch_add(1); }, 4);
      },
      4);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallersShareThePool) {
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep)
        parallel_for(50, [&](size_t i) { total.fetch_add(static_cast<long>(i)); }, 3);
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4L * 20 * (49 * 50 / 2));
}

TEST(ThreadPool, ExceptionReachesTheCaller) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(
                   64,
                   [&](size_t i) {
                     ran.fetch_add(1);
                     if (i == 5) throw std::runtime_error("boom");
                   },
                   4),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 64);  // the other indices still ran
  // The pool is still usable afterwards.
  std::atomic<int> after{0};
  parallel_for(10, [&](size_t) { after.fetch_add(1); }, 4);
  EXPECT_EQ(after.load(), 10);
}

}  // namespace
}  // namespace driftscope::detail
