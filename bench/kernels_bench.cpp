// Kernel micro-benchmark (Google Benchmark): weight bytes streamed per second by matvec (one
// token, as in generation) and matmul (a 64-token batch, as in prompt processing), per format,
// on a matrix larger than the caches. Usage: kernels_bench [--benchmark_filter=Q4_0] …
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace {

using namespace orchard;

constexpr int64_t kRows = 8192, kCols = 2048, kCopies = 8;  // 8 × 16 Mi elements > any cache

struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  size_t bytes = 0;
};

const Weights& weights(DType t) {
  static std::vector<std::pair<DType, Weights>> cache;
  for (auto& [type, w] : cache)
    if (type == t) return w;
  Weights w;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 0.02f);
  const size_t rb = row_bytes(t, kCols);
  std::vector<float> row(kCols);
  std::vector<uint8_t> m(rb * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(t, row.data(), m.data() + r * rb, kCols);
  }
  w.copies.assign(kCopies, m);
  w.bytes = m.size();
  cache.emplace_back(t, std::move(w));
  return cache.back().second;
}

void BM_Matmul(benchmark::State& state, DType t) {
  const int threads = static_cast<int>(state.range(0)), ntok = static_cast<int>(state.range(1));
  set_threads(threads);
  const Weights& w = weights(t);
  std::vector<float> x(static_cast<size_t>(kCols * ntok), 0.5f), y(static_cast<size_t>(kRows * ntok));
  std::vector<uint8_t> scratch;
  size_t i = 0;
  for (auto _ : state) {
    MatrixView m{t, kRows, kCols, w.copies[i++ % kCopies].data()};
    matmul(m, x.data(), ntok, y.data(), scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations() * ntok),
                                                  benchmark::Counter::kIsRate);
}

void register_all() {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                  DType::Q5_0, DType::Q5_1})
    benchmark::RegisterBenchmark((std::string("matmul/") + type_name(t)).c_str(),
                                 [t](benchmark::State& s) { BM_Matmul(s, t); })
        ->ArgsProduct({{1, 2}, {1, 64}})
        ->ArgNames({"threads", "tokens"})
        ->UseRealTime()
        ->MinTime(0.3);
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
