// Memory read bandwidth with 1 and N threads: the roofline for token generation, where every
// weight is read once per token. Usage: membw [--mib 1024] [--reps 7] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tensor/threadpool.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

// How far ahead the prefetching read requests lines: what the engine's one-token kernels use
// (tensor/kernels/kernels.h, kStreamAhead).
constexpr size_t kAheadWords = 4096 / 8;

// Sums 64-bit words so the compiler cannot drop the loads; wide loads when available. With
// `ahead`, every line is also requested 4 KB before it is read, as the engine's kernels do: on
// some hosts that reads faster than the hardware prefetcher alone, and the roofline is the
// faster of the two.
template <bool ahead>
uint64_t read_range(const uint64_t* p, size_t n) {
#if defined(__AVX512F__)
  __m512i acc0 = _mm512_set1_epi64(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (ahead && i + kAheadWords + 32 <= n)
      for (size_t l = 0; l < 32; l += 8) _mm_prefetch(reinterpret_cast<const char*>(p + i + kAheadWords + l), _MM_HINT_T0);
    acc0 = _mm512_add_epi64(acc0, _mm512_load_si512(p + i));
    acc1 = _mm512_add_epi64(acc1, _mm512_load_si512(p + i + 8));
    acc2 = _mm512_add_epi64(acc2, _mm512_load_si512(p + i + 16));
    acc3 = _mm512_add_epi64(acc3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(acc0, acc1), _mm512_add_epi64(acc2, acc3)));
  uint64_t s = 0;
  for (uint64_t l : lanes) s += l;
  for (; i < n; ++i) s += p[i];
  return s;
#else
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    if (ahead && i % 8 == 0 && i + kAheadWords < n) __builtin_prefetch(p + i + kAheadWords);
    s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
#endif
}

template <bool ahead>
double measure(const uint64_t* buf, size_t words, int threads, int reps, uint64_t& sink) {
  orchard::ThreadPool pool(threads);
  std::vector<double> gbs;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint64_t> sums(threads);
    auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ith, int nth) {
      size_t b = words * ith / nth / 8 * 8, e = words * (ith + 1) / nth / 8 * 8;
      sums[ith] = read_range<ahead>(buf + b, e - b);
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto v : sums) sink += v;
    gbs.push_back(static_cast<double>(words * 8) / s / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int reps = 7, max_threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: membw [--mib N] [--reps N] [--threads N]\n"
                  "Median read bandwidth (GB/s) over a buffer larger than the caches, 1..N threads,\n"
                  "plain and with every line requested 4 KB ahead; the faster is the roofline.\n");
      return 0;
    }
    if (i + 1 >= argc) { std::fprintf(stderr, "membw: %s needs a value\n", a.c_str()); return 2; }
    if (a == "--mib") mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--reps") reps = std::atoi(argv[++i]);
    else if (a == "--threads") max_threads = std::atoi(argv[++i]);
    else { std::fprintf(stderr, "membw: unknown option %s\n", a.c_str()); return 2; }
  }
  const size_t words = mib * 1024 * 1024 / 8;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, words * 8));
  if (!buf) { std::fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib); return 1; }
  for (size_t i = 0; i < words; ++i) buf[i] = i;  // touch every page
  uint64_t sink = 0;
  std::printf("| threads | read GB/s (median of %d, %zu MiB) | with lines requested 4 KB ahead | roofline (the faster) |\n"
              "|---|---|---|---|\n", reps, mib);
  for (int t = 1; t <= max_threads; ++t) {
    const double plain = measure<false>(buf, words, t, reps, sink), ahead = measure<true>(buf, words, t, reps, sink);
    std::printf("| %d | %.1f | %.1f | %.1f |\n", t, plain, ahead, std::max(plain, ahead));
  }
  std::fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(sink));
  std::free(buf);
  return 0;
}
