#include "tensor/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "tensor/huge_buffer.h"
#include "tensor/kernels/kernels.h"
#include "tensor/threadpool.h"

namespace orchard {
namespace {

// 64 bytes: one cache line, one AVX-512 load where the build targets it.
typedef uint64_t Line __attribute__((vector_size(64)));
constexpr size_t kLineWords = 8;
constexpr size_t kAheadWords = kernels::kStreamAhead / 8;

// Sums the words of [p, p + n) (n a multiple of 4 lines) four lines at a time.
template <bool ahead>
uint64_t read_range(const uint64_t* p, size_t n) {
  Line a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const auto* lines = reinterpret_cast<const Line*>(p);
  for (size_t i = 0; i + 4 * kLineWords <= n; i += 4 * kLineWords) {
    if (ahead && i + kAheadWords + 4 * kLineWords <= n)
      for (size_t l = 0; l < 4 * kLineWords; l += kLineWords) __builtin_prefetch(p + i + kAheadWords + l);
    const Line* q = lines + i / kLineWords;
    a0 += q[0], a1 += q[1], a2 += q[2], a3 += q[3];
  }
  const Line s = (a0 + a1) + (a2 + a3);
  uint64_t out = 0;
  for (size_t l = 0; l < kLineWords; ++l) out += s[l];
  return out;
}

}  // namespace

// Huge pages, as the engine's weights: from 4 KiB pages this host's reads sometimes ran at a
// twentieth of their usual rate for seconds at a time.
BandwidthProbe::BandwidthProbe(size_t bytes)
    : words_(std::max<size_t>(bytes / 8 / 32 * 32, 32)), mem_(std::make_unique<HugeBuffer>(words_ * 8)) {
  buf_ = reinterpret_cast<uint64_t*>(mem_->data());
  for (size_t i = 0; i < words_; ++i) buf_[i] = i;  // every page present before any timing
}

BandwidthProbe::~BandwidthProbe() = default;

double BandwidthProbe::read_once(ThreadPool& pool, bool ahead) {
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](int ith, int nth) {
    // Shares in whole groups of four lines, so every thread reads the same way.
    const size_t groups = words_ / 32, b = groups * ith / nth * 32, e = groups * (ith + 1) / nth * 32;
    sums[static_cast<size_t>(ith)] = ahead ? read_range<true>(buf_ + b, e - b) : read_range<false>(buf_ + b, e - b);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (uint64_t v : sums) sink_ += v;
  return static_cast<double>(words_ * 8) / s / 1e9;
}

double BandwidthProbe::read_median(ThreadPool& pool, bool ahead, int passes) {
  std::vector<double> gbs;
  for (int i = 0; i < std::max(passes, 1); ++i) gbs.push_back(read_once(pool, ahead));
  std::nth_element(gbs.begin(), gbs.begin() + gbs.size() / 2, gbs.end());
  return gbs[gbs.size() / 2];
}

double BandwidthProbe::roofline(ThreadPool& pool, int passes) {
  return std::max(read_median(pool, false, passes), read_median(pool, true, passes));
}

}  // namespace orchard
