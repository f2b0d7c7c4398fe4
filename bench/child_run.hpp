// One run of a child program for the benchmarks that time or measure `driftscope` side by side
// (bench_compare_memory, bench_compare_throughput): its wall and CPU seconds and peak RSS.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace dsbench {

struct ChildRun {
  int exit_code = -1;    // -1: it could not be started or did not exit normally
  double wall = 0;       // seconds
  double cpu = 0;        // user + system seconds, all threads: what a shared machine does not inflate
  double rss_mib = 0;    // peak resident set (wait4 ru_maxrss)
};

// Runs argv (argv[0] a path) with stdout sent to /dev/null and waits for it.
inline ChildRun run_child(const std::vector<std::string>& argv) {
  // Nothing left dirty by the previous run: a --json report (2.75 GB at a million pairs) is
  // still being written back, and the next binary measured would pay for it (a later column
  // looked ~2x slower than the same build in the first).
  ::sync();
  const auto t0 = std::chrono::steady_clock::now();
  ChildRun r;
  pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    std::freopen("/dev/null", "w", stdout);
    ::execv(a[0], a.data());
    std::_Exit(127);
  }
  int status = 0;
  rusage ru{};
  if (::wait4(pid, &status, 0, &ru) != pid) return r;
  r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  if (WIFEXITED(status) && WEXITSTATUS(status) != 127) r.exit_code = WEXITSTATUS(status);
  return r;
}

}  // namespace dsbench
