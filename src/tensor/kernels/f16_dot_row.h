#pragma once
// One row of fp16 weights · one token's activations (f32 values already rounded through fp16, as
// each ISA's F16 prepare writes them): the one-token F16 kernel's inner loop, one design for
// every x86 ISA, instantiated with the including file's vector ops (V: Reg, kWidth, zero, fma,
// add, sum) and loaders (as float_tiles.h). Include only after the ISA's target_begin header.
#include <cstddef>
#include <cstdint>

#include "tensor/kernels/kernels.h"

namespace orchard::kernels::x86 {
namespace {  // compiled per including file, for its target (see x86_q8_quantize.h)

// Four accumulators, so consecutive FMAs do not wait on each other (one chain capped a thread at
// ~24 GB/s of fp16 weights on AVX-512). The weights are also requested kStreamAhead bytes before
// they are read: the hardware prefetcher alone left a 1b F16 model at 11.4–11.7 tok/s on 1 thread
// and 18.8–22.8 on 2 (AVX-512), with these requests 12.6–12.9 and 23.5–24.8 (three rounds, back
// to back). Rows one after another in memory keep the requests useful across row ends.
template <class V, class LoadF16, class LoadF32>
inline float f16_dot_row(const uint8_t* row, const float* x, int64_t n) {
  constexpr int64_t kStep = 4 * V::kWidth;  // elements per iteration: 2·kStep bytes of weights
  const auto* xb = reinterpret_cast<const uint8_t*>(x);
  typename V::Reg a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    for (int64_t line = 0; line < 2 * kStep; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(row) + 2 * i + kStreamAhead + line, _MM_HINT_T0);
    a0 = V::fma(LoadF16::load(row, i), LoadF32::load(xb, i), a0);
    a1 = V::fma(LoadF16::load(row, i + V::kWidth), LoadF32::load(xb, i + V::kWidth), a1);
    a2 = V::fma(LoadF16::load(row, i + 2 * V::kWidth), LoadF32::load(xb, i + 2 * V::kWidth), a2);
    a3 = V::fma(LoadF16::load(row, i + 3 * V::kWidth), LoadF32::load(xb, i + 3 * V::kWidth), a3);
  }
  for (; i + V::kWidth <= n; i += V::kWidth) a0 = V::fma(LoadF16::load(row, i), LoadF32::load(xb, i), a0);
  float s = V::sum(V::add(V::add(a0, a1), V::add(a2, a3)));
  for (; i < n; ++i) s += LoadF16::one(row, i) * x[i];
  return s;
}

}  // namespace
}  // namespace orchard::kernels::x86
