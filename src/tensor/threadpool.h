#pragma once
// A pool built for per-token work: a forward pass forks and joins hundreds of times per token,
// so workers stay alive, spin briefly on an atomic generation counter (a fork costs well under a
// microsecond when they are hot) and only then sleep on a condition variable.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace orchard {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 means all hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  // Runs fn(ith, nth) on every thread (the caller is ith 0) and returns when all are done.
  // Not re-entrant: fn must not call run() on the same pool.
  void run(const std::function<void(int ith, int nth)>& fn);

  // Splits [0, n) into size() contiguous ranges, each a multiple of `grain` except the last,
  // and runs fn(begin, end) on each.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The same split, but a thread that finishes its range takes pieces (whole grains) from the
  // end of a range not yet finished, so the threads end together even when one runs slower (a
  // busy neighbour on a shared host, memory bandwidth shared unevenly); each thread still works
  // through its own range front to back, so a stream of weights stays one stream. Pieces may
  // run in any order: fn must not depend on it.
  void parallel_for_balanced(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int ith);

  int n_;
  std::vector<std::thread> threads_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  // A thread's range of grains still to do, [lo, hi) packed in one word so that the owner
  // (taking from lo) and a thief (taking from hi) never both get the same grain.
  struct alignas(64) Range {
    std::atomic<uint64_t> lohi{0};
  };
  std::unique_ptr<Range[]> ranges_;
};

// The process-wide pool the kernels use; set_threads() resizes it (0: all hardware threads).
ThreadPool& global_pool();
void set_threads(int n_threads);
// A pool of one: runs everything on the calling thread (for work too small to split).
ThreadPool& serial_pool();

}  // namespace orchard
