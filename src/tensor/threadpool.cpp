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

ThreadPool::ThreadPool(int n_threads) : n_(resolve(n_threads)), ranges_(new Range[static_cast<size_t>(n_)]) {
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

uint64_t pack_range(uint64_t lo, uint64_t hi) { return lo << 32 | hi; }
uint64_t range_lo(uint64_t r) { return r >> 32; }
uint64_t range_hi(uint64_t r) { return r & 0xFFFFFFFFu; }

// Takes up to `most` grains from the front (owner) or the back (thief) of `range`; false when
// it is empty. One compare-exchange on the packed word, so a grain goes to exactly one taker.
bool take(std::atomic<uint64_t>& range, uint64_t most, bool front, uint64_t& lo, uint64_t& hi) {
  uint64_t r = range.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t a = range_lo(r), b = range_hi(r);
    if (a >= b) return false;
    const uint64_t k = std::min(most, b - a);
    lo = front ? a : b - k;
    hi = front ? a + k : b;
    const uint64_t next = front ? pack_range(a + k, b) : pack_range(a, b - k);
    if (range.compare_exchange_weak(r, next, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
}

}  // namespace

void ThreadPool::parallel_for_balanced(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (grain < 1) grain = 1;
  const int64_t blocks = (n + grain - 1) / grain;
  if (n_ == 1 || blocks <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  if (blocks >= (int64_t{1} << 32)) return parallel_for(n, grain, fn);  // does not fit a range word
  for (int i = 0; i < n_; ++i)
    ranges_[static_cast<size_t>(i)].lohi.store(pack_range(static_cast<uint64_t>(blocks * i / n_),
                                                          static_cast<uint64_t>(blocks * (i + 1) / n_)),
                                               std::memory_order_relaxed);
  // Pieces of about a thirty-second of a share: a compare-exchange per piece costs little, and
  // the last piece is what the other thread may wait for (an eighth measured 2 % slower).
  const uint64_t piece = static_cast<uint64_t>(std::max<int64_t>(1, blocks / (int64_t{32} * n_)));
  run([&](int ith, int nth) {
    uint64_t lo = 0, hi = 0;
    auto span = [&] { fn(static_cast<int64_t>(lo) * grain, std::min(n, static_cast<int64_t>(hi) * grain)); };
    while (take(ranges_[static_cast<size_t>(ith)].lohi, piece, true, lo, hi)) span();
    for (int k = 1; k < nth; ++k) {
      auto& other = ranges_[static_cast<size_t>((ith + k) % nth)].lohi;
      while (take(other, piece, false, lo, hi)) span();
    }
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
