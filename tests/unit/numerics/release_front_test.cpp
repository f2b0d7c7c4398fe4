// numerics::ReleaseFront (when a pair's tasks give their pages back): over random finishing
// orders, every task is given back by the time the last one finishes, a run is at least `batch`
// tasks unless it ends the pair or is a lone task far past a straggler, and no more than
// 2 `batch` finished tasks are ever waiting to be given back.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "numerics/release_front.hpp"

namespace {

using driftscope::numerics::ReleaseFront;

void check_order(const std::vector<size_t>& order, size_t batch) {
  const size_t tasks = order.size();
  ReleaseFront front(tasks, batch);
  std::vector<bool> done(tasks, false), given(tasks, false);
  for (size_t k = 0; k < tasks; ++k) {
    const size_t t = order[k];
    done[t] = true;
    const auto [first, last] = front.finish(t);
    ASSERT_LE(first, last);
    ASSERT_LE(last, tasks);
    if (first < last) {
      const bool lone = last - first == 1 && first == t;
      EXPECT_TRUE(last - first >= batch || last == tasks || lone) << "run [" << first << ", " << last << ")";
      for (size_t i = first; i < last; ++i) {
        EXPECT_TRUE(done[i]) << "task " << i << " given back before it finished";
        given[i] = true;
      }
    }
    size_t waiting = 0;
    for (size_t i = 0; i < tasks; ++i) waiting += done[i] && !given[i];
    EXPECT_LT(waiting, 2 * batch) << "after task " << t;
  }
  for (size_t i = 0; i < tasks; ++i) EXPECT_TRUE(given[i]) << "task " << i << " never given back";
}

TEST(ReleaseFront, EveryTaskGivenBackInRunsAndNoneWaitsLong) {
  std::mt19937 rng(7);
  for (size_t tasks : {1u, 2u, 7u, 8u, 9u, 64u, 1000u}) {
    for (size_t batch : {1u, 3u, 8u, 100u}) {
      std::vector<size_t> order(tasks);
      std::iota(order.begin(), order.end(), size_t{0});
      check_order(order, batch);  // in order
      std::reverse(order.begin(), order.end());
      check_order(order, batch);  // the first task last: a straggler
      for (int r = 0; r < 5; ++r) {
        // Nearly in order, as a pool hands them out: each swapped with a neighbour at random.
        std::iota(order.begin(), order.end(), size_t{0});
        for (size_t i = 0; i + 1 < tasks; ++i)
          if (rng() % 3 == 0) std::swap(order[i], order[i + 1]);
        check_order(order, batch);
        std::shuffle(order.begin(), order.end(), rng);
        check_order(order, batch);
      }
    }
  }
}

}  // namespace
