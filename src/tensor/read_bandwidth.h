#pragma once
// Memory read bandwidth, the roofline of token generation (every weight is read once per
// token): `bench/membw` prints it per thread count, and `orchard bench --roofline` reads it
// between the repetitions of a generation run, so each one is set against the bandwidth of
// that same minute on a host whose bandwidth moves.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace orchard {

class HugeBuffer;
class ThreadPool;

class BandwidthProbe {
 public:
  // A buffer of `bytes` (make it larger than the caches), every page touched once.
  explicit BandwidthProbe(size_t bytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  size_t bytes() const { return words_ * 8; }
  // GB/s of one pass over the buffer, the pool's threads each reading an equal contiguous
  // share. `ahead`: every line is also requested 4 KB before it is read, as the engine's F16 and
  // Q8_0 one-token kernels do; on some hosts that reads faster than the hardware prefetcher.
  double read_once(ThreadPool& pool, bool ahead);
  // The median of `passes` passes (this host's bandwidth dips for tens of milliseconds at a
  // time: one pass alone read as little as a fifth of the next).
  double read_median(ThreadPool& pool, bool ahead, int passes);
  // read_median of each kind, the faster.
  double roofline(ThreadPool& pool, int passes = 3);
  // Folded into by every pass, so the compiler cannot drop the loads.
  uint64_t checksum() const { return sink_; }

 private:
  size_t words_ = 0;
  std::unique_ptr<HugeBuffer> mem_;
  uint64_t* buf_ = nullptr;
  uint64_t sink_ = 0;
};

}  // namespace orchard
