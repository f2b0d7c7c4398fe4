#include "common/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace driftscope::detail {
namespace {

// One parallel_for call. Indices are handed out by an atomic counter, so threads that arrive
// late or run slowly simply take fewer indices (work sharing without a scheduler).
struct Job {
  void* ctx = nullptr;
  void (*call)(void*, size_t) = nullptr;
  size_t n = 0;
  unsigned max_helpers = 0;            // pool threads allowed to join (the caller is extra)
  unsigned helpers = 0;                // guarded by the pool mutex
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  // Claims and runs indices until none is left. Returns after its last claimed call.
  void work() {
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        call(ctx, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      // The last finisher wakes the caller; release ordering publishes fn's writes to it.
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n) done.notify_all();
    }
  }
  bool exhausted() const { return next.load(std::memory_order_relaxed) >= n; }
};

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(size_t n, unsigned threads, void* ctx, void (*call)(void*, size_t)) {
    auto job = std::make_shared<Job>();
    job->ctx = ctx;
    job->call = call;
    job->n = n;
    job->max_helpers = static_cast<unsigned>(std::min<size_t>(threads - 1, n - 1));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Grow lazily to the largest request seen: a test asking for 8 threads on a 2-core
      // machine really gets 8, and a process that never compares large tensors starts none.
      while (workers_.size() < job->max_helpers) workers_.emplace_back([this] { worker_loop(); });
      jobs_.push_back(job);
    }
    wake_.notify_all();
    job->work();
    for (size_t d = job->done.load(std::memory_order_acquire); d != n;
         d = job->done.load(std::memory_order_acquire)) {
      job->done.wait(d, std::memory_order_acquire);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::erase(jobs_, job);
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  void worker_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      std::shared_ptr<Job> job;
      wake_.wait(lock, [&] {
        if (stop_) return true;
        std::erase_if(jobs_, [](const std::shared_ptr<Job>& j) { return j->exhausted(); });
        for (auto& j : jobs_) {
          if (j->helpers < j->max_helpers) {
            job = j;
            return true;
          }
        }
        return false;
      });
      if (stop_) return;
      ++job->helpers;
      lock.unlock();
      job->work();
      job.reset();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

unsigned hardware_threads() noexcept {
  // Asked once: glibc reads /sys/devices/system/cpu/online on every call, and a comparison asked
  // five times before measuring anything (issue 30 item 3: start-up).
  static const unsigned n = [] {
    const unsigned c = std::thread::hardware_concurrency();
    return c == 0 ? 1u : c;
  }();
  return n;
}

void parallel_for_impl(size_t n, unsigned threads, void* ctx, void (*call)(void*, size_t)) {
  if (n == 0) return;
  if (threads == 0) threads = hardware_threads();
  threads = std::min(threads, kMaxPoolThreads);
  if (threads == 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) call(ctx, i);
    return;
  }
  pool().run(n, threads, ctx, call);
}

}  // namespace driftscope::detail
