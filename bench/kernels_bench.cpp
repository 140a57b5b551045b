// Kernel micro-benchmark (Google Benchmark): weight bytes streamed per second by matvec (one
// token, as in generation) and matmul (a 64-token batch, as in prompt processing), per format,
// on a matrix larger than the caches: `matmul/` over the file's row-major rows, `packed/` over
// the copy a model repacks at load (what generation reads for Q4_0, Q8_0 and F16 on AVX-512),
// shaped as a 1b down projection so that the Q formats' wide rows take their slabbed layout;
// `incache/` the same packed kernels on one 512 KiB matrix that stays in L2, one token: the rate
// the kernel's instructions allow, which generation cannot beat whatever the memory.
// Usage: kernels_bench [--benchmark_filter=Q4_0] …
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/error.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace {

using namespace orchard;

constexpr int64_t kCopies = 8;  // 8 × 16 Mi elements > any cache

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kRowMajor{8192, 2048}, kDown{2048, 8192};
constexpr int64_t kInCacheCols = 2048;
constexpr size_t kInCacheBytes = size_t{512} << 10;  // half of a 1 MiB L2

struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<std::unique_ptr<HugeBuffer>> packs;  // with `packed`: each copy repacked
  std::vector<MatrixView> views;
  size_t bytes = 0;
};

const Weights& weights(DType t, bool packed, bool in_cache = false) {
  static std::vector<std::pair<std::tuple<DType, bool, bool>, Weights>> cache;
  for (auto& [key, w] : cache)
    if (key == std::tuple{t, packed, in_cache}) return w;
  const Shape shape = in_cache ? Shape{static_cast<int64_t>(kInCacheBytes / row_bytes(t, kInCacheCols)) / 16 * 16, kInCacheCols}
                               : packed ? kDown : kRowMajor;
  Weights w;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 0.02f);
  const size_t rb = row_bytes(t, shape.cols);
  std::vector<float> row(shape.cols);
  std::vector<uint8_t> m(rb * shape.rows);
  if (t == DType::Q4_K || t == DType::Q6_K) {
    // No quantizer for the K-quants here: random bytes with small positive scales.
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    const size_t block = t == DType::Q6_K ? 210 : 144, d_at = t == DType::Q6_K ? 208 : 0;
    const uint16_t d = 0x2000;  // 2^-7 as fp16
    for (size_t b = 0; b < m.size(); b += block) {
      std::memcpy(&m[b + d_at], &d, 2);
      if (t == DType::Q4_K) std::memcpy(&m[b + 2], &d, 2);
    }
  } else {
    for (int64_t r = 0; r < shape.rows; ++r) {
      for (auto& v : row) v = nd(rng);
      quantize_row(t, row.data(), m.data() + r * rb, shape.cols);
    }
  }
  w.copies.assign(in_cache ? 1 : kCopies, m);
  w.bytes = m.size();
  for (auto& c : w.copies) {
    w.views.push_back({t, shape.rows, shape.cols, c.data()});
    if (packed) {
      w.packs.push_back(pack_for_cpu(w.views.back()));
      if (!w.packs.back()) throw Error(std::string(type_name(t)) + " has no repacked layout on this CPU");
      if (pack_replaces_original(t)) w.views.back().data = nullptr;
    }
  }
  if (packed) w.copies.clear();
  cache.emplace_back(std::tuple{t, packed, in_cache}, std::move(w));
  return cache.back().second;
}

void BM_Matmul(benchmark::State& state, DType t, bool packed, bool in_cache = false) {
  const int threads = static_cast<int>(state.range(0)), ntok = static_cast<int>(state.range(1));
  set_threads(threads);
  const Weights& w = weights(t, packed, in_cache);
  const int64_t rows = w.views[0].rows, cols = w.views[0].cols;
  std::vector<float> x(static_cast<size_t>(cols * ntok), 0.5f), y(static_cast<size_t>(rows * ntok));
  std::vector<uint8_t> scratch;
  size_t i = 0;
  for (auto _ : state) {
    matmul(w.views[i++ % w.views.size()], x.data(), ntok, y.data(), scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations() * ntok),
                                                  benchmark::Counter::kIsRate);
}

void register_all() {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                  DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q6_K})
    benchmark::RegisterBenchmark((std::string("matmul/") + type_name(t)).c_str(),
                                 [t](benchmark::State& s) { BM_Matmul(s, t, false); })
        ->ArgsProduct({{1, 2}, {1, 64}})
        ->ArgNames({"threads", "tokens"})
        ->UseRealTime()
        ->MinTime(0.3);
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    MatrixView probe{t, kDown.rows, kDown.cols, &t};  // any non-null data: only sized
    if (packed_bytes(probe) == 0) continue;
    benchmark::RegisterBenchmark((std::string("packed/") + type_name(t)).c_str(),
                                 [t](benchmark::State& s) { BM_Matmul(s, t, true); })
        ->ArgsProduct({{1, 2}, {1, 64}})
        ->ArgNames({"threads", "tokens"})
        ->UseRealTime()
        ->MinTime(0.3);
    benchmark::RegisterBenchmark((std::string("incache/") + type_name(t)).c_str(),
                                 [t](benchmark::State& s) { BM_Matmul(s, t, true, true); })
        ->Args({1, 1})
        ->ArgNames({"threads", "tokens"})
        ->UseRealTime()
        ->MinTime(0.3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
