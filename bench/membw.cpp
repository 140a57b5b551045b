// Memory read bandwidth with 1 and N threads: the roofline for token generation, where every
// weight is read once per token. Usage: membw [--mib 1024] [--reps 7] [--threads N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <new>

#include "tensor/read_bandwidth.h"
#include "tensor/threadpool.h"

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
  if (reps < 1 || max_threads < 1 || mib < 1) {
    std::fprintf(stderr, "membw: --mib, --reps and --threads must be at least 1\n");
    return 2;
  }
  try {
    orchard::BandwidthProbe probe(mib * 1024 * 1024);
    std::printf("| threads | read GB/s (median of %d, %zu MiB) | with lines requested 4 KB ahead | roofline (the faster) |\n"
                "|---|---|---|---|\n", reps, mib);
    for (int t = 1; t <= max_threads; ++t) {
      orchard::ThreadPool pool(t);
      const double plain = probe.read_median(pool, false, reps), ahead = probe.read_median(pool, true, reps);
      std::printf("| %d | %.1f | %.1f | %.1f |\n", t, plain, ahead, std::max(plain, ahead));
    }
    std::fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(probe.checksum()));
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  return 0;
}
