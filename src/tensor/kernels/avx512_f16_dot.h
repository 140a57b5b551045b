#pragma once
// One row of fp16 weights · one token's activations (f32 values already rounded through fp16, as
// f16_prepare writes them) on AVX-512: the one-token F16 kernel's inner loop, shared by the
// row-major path (avx512.cpp) and the column slabs (avx512_f16_slabs.cpp). Include only after
// avx512_target_begin.h.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/kernels/kernels.h"

namespace orchard::kernels::x86 {
namespace {  // compiled per including file, for its target (see x86_q8_quantize.h)

// Four accumulators, so consecutive FMAs do not wait on each other (one chain capped a thread at
// ~24 GB/s of fp16 weights). The weights are also requested kStreamAhead bytes before they are
// read: the hardware prefetcher alone left a 1b F16 model at 11.4–11.7 tok/s on 1 thread and
// 18.8–22.8 on 2, with these requests 12.6–12.9 and 23.5–24.8 (three rounds, back to back).
// Rows one after another in memory keep the requests useful across row ends.
inline float f16_dot_row(const uint8_t* row, const float* x, int64_t n) {
  const auto* h = reinterpret_cast<const uint16_t*>(row);
  auto load = [&](int64_t i) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))); };
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(row) + 2 * i + kStreamAhead, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row) + 2 * i + kStreamAhead + 64, _MM_HINT_T0);
    a0 = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load(i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load(i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load(i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), a0);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += _cvtsh_ss(h[i]) * x[i];
  return s;
}

}  // namespace
}  // namespace orchard::kernels::x86
