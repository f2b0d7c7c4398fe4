// Internal: when the tasks of one pair, finishing in any order, give their pages back
// (compare_pair with PairOptions::release_pages; common/pages.hpp, release_pages).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace driftscope::numerics {

// The tasks of one pair finish in any order; their pages are given back (common/pages.hpp,
// release_pages) once the tasks finished from the first on form a run of at least `batch` tasks
// past the last run given back, or reach the last task. Releasing each task's share as it
// finished (1 MiB a side for float32) cost a TLB shootdown on the other threads per call: a
// quarter of a cached 512 MiB comparison's time on 2 threads. The pages kept resident meanwhile
// are about 2 `batch` tasks' plus those of the tasks in flight.
class ReleaseFront {
 public:
  ReleaseFront(size_t tasks, size_t batch) : done_(tasks, 0), batch_(std::max<size_t>(batch, 1)) {}
  // Marks task t finished; returns the tasks [first, last) to release now (empty when none).
  std::pair<size_t, size_t> finish(size_t t) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[t] = 1;
    while (front_ < done_.size() && done_[front_]) ++front_;
    // Far past a task still running (a thread the OS has put aside): at once, as before, so that
    // no more than about `batch` finished tasks wait on it. (Released again with the run later:
    // dropping pages twice changes nothing.)
    if (t >= front_ && t - front_ >= batch_) return {t, t + 1};
    if (front_ - given_ < batch_ && !(front_ == done_.size() && front_ > given_)) return {0, 0};
    const std::pair<size_t, size_t> run{given_, front_};
    given_ = front_;
    return run;
  }

 private:
  std::mutex mu_;
  std::vector<uint8_t> done_;
  size_t batch_, front_ = 0, given_ = 0;
};

}  // namespace driftscope::numerics
