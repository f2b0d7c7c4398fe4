// The thread-safety contract of driftscope/reader.hpp: one Reader shared by threads that only call
// its const members. records() and find() build their tables lazily on the first call; the threads
// here all make that first call at once, so a lazy build that is not synchronised (two threads
// filling the same vector) shows as different answers, a crash, or an ASan report in the asan stage.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "driftscope/reader.hpp"
#include "driftscope/writer.hpp"
#include "test_util.hpp"

using namespace driftscope;
using dstest::as_bytes;

TEST(ReaderThreads, ConstCallsFromManyThreadsOnOneReaderAgree) {
  constexpr int kTensors = 300, kThreads = 8;
  const std::string path = dstest::scratch_path("reader_threads");
  {
    auto w = Writer::create(path, WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    for (int i = 0; i < kTensors; ++i) {
      auto v = dstest::ramp(16, static_cast<float>(i));
      ASSERT_TRUE((*w)->write(dstest::f32_info("t" + std::to_string(i), {4, 4}), as_bytes(v)).ok());
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  OpenOptions o;
  o.verify = Verify::frames;  // payload CRCs are checked by the threads (verify_payload)
  auto opened = Reader::open(path, o);
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  const Reader& reader = *opened;

  std::atomic<int> ready{0};
  std::vector<const Record*> first(kThreads), found(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // every first call at once
      // Half the threads start with find() (the identity table), half with records().
      const int probe = (t * 37) % kTensors;
      const std::string name = "t" + std::to_string(probe);
      if (t % 2) found[t] = reader.find(name);
      const auto records = reader.records();
      if (!(t % 2)) found[t] = reader.find(name);
      first[t] = records.data();
      if (records.size() != static_cast<size_t>(kTensors)) ++failures[t];
      for (int i = 0; i < kTensors; ++i) {
        const Record& r = records[static_cast<size_t>(i)];
        if (r.info.name != "t" + std::to_string(i) || !reader.verify_payload(r).ok()) ++failures[t];
      }
      if (found[t] != &records[static_cast<size_t>(probe)]) ++failures[t];
      if (reader.find_all(name).size() != 1 || !reader.check_unchanged().ok()) ++failures[t];
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    EXPECT_EQ(first[t], first[0]) << "thread " << t << " saw another records() table";
  }
  std::remove(path.c_str());
}
