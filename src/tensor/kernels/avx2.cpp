// AVX2 + FMA + F16C kernels (Haswell, Zen 1 and later). Compiled for that target whatever the
// build's -march, and only called when the CPU reports the features.
#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>

#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/x86_int8_tiles.h"

namespace orchard::kernels {
namespace {

using x86::f16;
using x86::hsum256;

struct Avx2Ops {
  // maddubs' int16 pair sums stay below 32767 for every format here (|u| ≤ 128, |s| ≤ 127,
  // and u ≤ 63 where s can be −128).
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

template <int RB, int TB> using Q4_0Tile = x86::Q4_0Tile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q8_0Tile = x86::Q8_0Tile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q4_KTile = x86::Q4_KTile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q6_KTile = x86::Q6_KTile<Avx2Ops, RB, TB>;

// Float weights, 8 elements per step; `Load` widens W's and X's storage to float.
template <class Load>
struct FloatTiles {
  template <int RB, int TB>
  struct Tile {
    static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t n, float* y,
                    int64_t ldy) {
      __m256 acc[RB][TB];
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        __m256 xv[TB];
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) xv[t] = Load::load8(x + t * xrb, i);
        #pragma GCC unroll 8
        for (int r = 0; r < RB; ++r) {
          const __m256 wv = Load::load8(w + r * wrb, i);
          #pragma GCC unroll 8
          for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r)
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          float s = hsum256(acc[r][t]);
          for (int64_t j = i; j < n; ++j) s += Load::one(w + r * wrb, j) * Load::one(x + t * xrb, j);
          y[t * ldy + r] = s;
        }
    }
  };
};

struct LoadF32 {
  static __m256 load8(const uint8_t* p, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i); }
  static float one(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static __m256 load8(const uint8_t* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float one(const uint8_t* p, int64_t i) { return f16(reinterpret_cast<const uint16_t*>(p)[i]); }
};

template <int RB, int TB> using F32Tile = FloatTiles<LoadF32>::Tile<RB, TB>;
template <int RB, int TB> using F16Tile = FloatTiles<LoadF16>::Tile<RB, TB>;

}  // namespace

Kernels lookup_avx2(DType w) {
  switch (w) {
    case DType::Q4_0: return {gemm_tiled<Q4_0Tile>};
    case DType::Q8_0: return {gemm_tiled<Q8_0Tile>};
    case DType::Q4_K: return {gemm_tiled<Q4_KTile>};
    case DType::Q6_K: return {gemm_tiled<Q6_KTile>};
    case DType::F32: return {gemm_tiled<F32Tile>};
    case DType::F16: return {gemm_tiled<F16Tile>};
    default: return {};
  }
}

}  // namespace orchard::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __x86_64__
