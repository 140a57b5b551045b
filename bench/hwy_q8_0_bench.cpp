// Google Highway against Orchard's own SIMD kernels, on the product generation spends its time
// in: a Q8_0 matrix (row-major, as in the file) times one Q8_0-rounded token, one thread. The
// Highway side is written as Highway's documentation teaches (dynamic dispatch over every target
// this build of the library offers); Orchard's is `matmul` on the same rows with its run-time
// kernel choice (row-major tiles, not the repacked layout, so both read the same bytes).
// docs/architecture.md records the result and the choice it led to.
// Usage: hwy_q8_0_bench [rows cols passes]
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hwy_q8_0_bench.cpp"
#include "hwy/foreach_target.h"  // NOLINT: includes this file once per target
#include "hwy/highway.h"

#include <cmath>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace orchard_hwy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A Q8_0 block: an fp16 scale and 32 int8 values.
constexpr size_t kBlock = 34;

// The scale, an IEEE half, as a float: the exponent rebiased (normal), or the mantissa times
// 2^-24 (subnormal); Q8_0 scales are finite.
inline float half_to_float(const uint8_t* p) {
  const uint32_t h = static_cast<uint32_t>(p[0] | (p[1] << 8));
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 31, man = h & 1023;
  float f;
  if (exp == 0) {
    f = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  const uint32_t bits = sign | ((exp + 112) << 23) | (man << 13);
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

const char* Name() { return hwy::TargetName(HWY_TARGET); }

// y[r] = Σ_blocks d_w · d_x · Σ_i w_i x_i. Highway 1.0 has no int8 dot-product op, so the int8
// values widen to int16 and multiply-add in pairs into int32 (what its documentation offers),
// then each block's sums scale into a float accumulator; one reduction per row.
void Rows(const uint8_t* w, const uint8_t* x, int64_t rows, int64_t nb, float* y) {
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const size_t step = hn::Lanes(d16);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r * nb) * kBlock;
    auto acc = hn::Zero(df);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = row + static_cast<size_t>(b) * kBlock;
      const uint8_t* xb = x + static_cast<size_t>(b) * kBlock;
      auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
      for (size_t i = 0; i < 32; i += step) {
        const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(wb + 2 + i)));
        const auto xv = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(xb + 2 + i)));
        s0 = hn::ReorderWidenMulAccumulate(d32, wv, xv, s0, s1);
      }
      const auto sums = hn::ConvertTo(df, hn::Add(s0, s1));
      acc = hn::MulAdd(sums, hn::Set(df, half_to_float(wb) * half_to_float(xb)), acc);
    }
    y[r] = hn::GetLane(hn::SumOfLanes(df, acc));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace orchard_hwy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace orchard_hwy {
HWY_EXPORT(Rows);
HWY_EXPORT(Name);
}  // namespace orchard_hwy

int main(int argc, char** argv) {
  using namespace orchard;
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 4096, cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 9;
  if (rows <= 0 || cols <= 0 || cols % 32 != 0 || passes <= 0) {
    std::fprintf(stderr, "usage: hwy_q8_0_bench [rows cols passes]: cols a multiple of 32\n");
    return 2;
  }
  set_threads(1);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols)), x(static_cast<size_t>(cols));
  const size_t rb = row_bytes(DType::Q8_0, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows)), xq(rb);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    quantize_row(DType::Q8_0, row.data(), w.data() + rb * static_cast<size_t>(r), cols);
  }
  for (float& v : x) v = dist(rng);
  quantize_activations(DType::Q8_0, x.data(), xq.data(), cols);
  const MatrixView m{DType::Q8_0, rows, cols, w.data()};
  std::vector<float> y_own(static_cast<size_t>(rows)), y_hwy(static_cast<size_t>(rows));
  std::vector<uint8_t> scratch;
  auto own = [&] { matmul(m, x.data(), 1, y_own.data(), scratch); };
  auto hwy_rows = [&] { HWY_DYNAMIC_DISPATCH(orchard_hwy::Rows)(w.data(), xq.data(), rows, cols / 32, y_hwy.data()); };
  auto seconds = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  own();
  hwy_rows();
  // The two agree to float rounding (the same integer sums, scaled and added in other orders).
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    worst = std::max(worst, std::fabs(static_cast<double>(y_own[r] - y_hwy[r])) / (1.0 + std::fabs(y_own[r])));
  // Alternating passes, each long enough to time (at least ~20 ms of repeats).
  const int reps = std::max<int>(1, static_cast<int>(0.02 / std::max(1e-6, seconds(own))));
  std::vector<double> t_own, t_hwy;
  for (int p = 0; p < passes; ++p) {
    t_own.push_back(seconds([&] { for (int i = 0; i < reps; ++i) own(); }) / reps);
    t_hwy.push_back(seconds([&] { for (int i = 0; i < reps; ++i) hwy_rows(); }) / reps);
  }
  std::sort(t_own.begin(), t_own.end());
  std::sort(t_hwy.begin(), t_hwy.end());
  const double mo = t_own[t_own.size() / 2], mh = t_hwy[t_hwy.size() / 2];
  const double gb = static_cast<double>(w.size()) / 1e9;
  std::printf("Q8_0 %lld x %lld (%.1f MB), one token, one thread, median of %d passes x %d repeats\n",
              static_cast<long long>(rows), static_cast<long long>(cols), gb * 1e3, passes, reps);
  std::printf("orchard (%s): %.1f us, %.1f GB/s\n", kernels::isa_name(kernels::detect_isa()), mo * 1e6, gb / mo);
  std::printf("highway (%s): %.1f us, %.1f GB/s\n", HWY_DYNAMIC_DISPATCH(orchard_hwy::Name)(), mh * 1e6, gb / mh);
  std::printf("highway / orchard time: %.2f; largest relative difference %.2g\n", mh / mo, worst);
  return worst < 1e-3 ? 0 : 1;
}
#endif  // HWY_ONCE
