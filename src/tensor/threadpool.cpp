#include "tensor/threadpool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ORCHARD_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define ORCHARD_PAUSE() asm volatile("yield")
#else
#define ORCHARD_PAUSE() ((void)0)
#endif

namespace orchard {
namespace {

// Spin long enough to cover the gap between two matmuls of one token (~tens of µs), short
// enough that an idle engine does not burn a core. Measured in time, not iterations, so it
// holds under emulation (qemu) and on slow cores alike.
constexpr auto kSpinTime = std::chrono::microseconds(200);

// Spins until done() or the spin time is up; returns done().
template <class Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      ORCHARD_PAUSE();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

int resolve(int n) {
  if (n > 0) return n;
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_(resolve(n_threads)) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = seen;
    spin_until([&] { return (gen = generation_.load(std::memory_order_acquire)) != seen; });
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      // seq_cst pairs with run(): either it sees us asleep or we see its new generation.
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    (*job_)(ith, n_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // pairs with the predicate check under the lock
    wake_.notify_all();
  }
  fn(0, n_);
  // With more threads than free cores a worker may be descheduled: after the spin, give the
  // core away instead of burning the time slice it needs.
  while (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; }))
    std::this_thread::yield();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (grain < 1) grain = 1;
  const int64_t blocks = (n + grain - 1) / grain;
  if (n_ == 1 || blocks <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  run([&](int ith, int nth) {
    const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    const int64_t begin = b0 * grain, end = std::min(n, b1 * grain);
    if (begin < end) fn(begin, end);
  });
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& global_pool() {
  auto& p = pool_slot();
  if (!p) p = std::make_unique<ThreadPool>(0);
  return *p;
}

ThreadPool& serial_pool() {
  static ThreadPool one(1);
  return one;
}

void set_threads(int n_threads) {
  auto& p = pool_slot();
  if (!p || p->size() != resolve(n_threads)) p = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace orchard
