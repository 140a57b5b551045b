#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tensor/threadpool.h"

namespace orchard {
namespace {

TEST(ThreadPool, RunsEveryThreadOncePerFork) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    for (int rep = 0; rep < 1000; ++rep) {
      std::vector<std::atomic<int>> hits(n);
      pool.run([&](int ith, int nth) {
        EXPECT_EQ(nth, n);
        hits[ith].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "thread " << i << " rep " << rep;
    }
  }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnceInGrains) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 7, 64, 1000, 1001}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    pool.parallel_for(n, 8, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 8, 0);
      for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "n " << n << " i " << i;
  }
}

TEST(ThreadPool, BalancedForCoversRangeExactlyOnceInGrains) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 1001, 40000}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      pool.parallel_for_balanced(n, 8, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 8, 0);
        EXPECT_TRUE(e == n || e % 8 == 0);
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << threads << " threads, n " << n << " i " << i;
    }
  }
}

// A thread slowed down (here: every piece it runs takes a millisecond) has the end of its range
// taken by the others, and still every grain runs once.
TEST(ThreadPool, BalancedForHandsASlowThreadsWorkToTheOthers) {
  ThreadPool pool(2);
  const int64_t n = 64 * 16;
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  std::vector<std::atomic<int>> by(static_cast<size_t>(n));
  pool.run([](int, int) {});  // workers started
  pool.parallel_for_balanced(n, 16, [&](int64_t b, int64_t e) {
    thread_local const int me = [] {
      static std::atomic<int> next{0};
      return next.fetch_add(1);
    }();
    if (b < n / 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the first half's owner is slow
    for (int64_t i = b; i < e; ++i) {
      seen[static_cast<size_t>(i)].fetch_add(1);
      by[static_cast<size_t>(i)].store(me);
    }
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << i;
  // The end of the slow first half went to the thread that owned the second half.
  EXPECT_NE(by[static_cast<size_t>(n / 2 - 1)].load(), by[0].load());
}

TEST(ThreadPool, SurvivesIdleSleepAndWakes) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.run([&](int, int) { count.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // workers fall asleep
  pool.run([&](int, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 4);
}

}  // namespace
}  // namespace orchard
