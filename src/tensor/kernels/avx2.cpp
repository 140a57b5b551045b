// AVX2 + FMA + F16C kernels (Haswell, Zen 1 and later). Compiled for that target whatever the
// build's -march, and only called when the CPU reports the features.
#if defined(__x86_64__)
#include "tensor/kernels/kernels.h"

#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/f16_dot_row.h"
#include "tensor/kernels/float_tiles.h"
#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/x86_int8_tiles.h"

namespace orchard::kernels {

// F16 weights against activations prepared once per token as floats already rounded through
// fp16 (the values the F16 tiles would convert again for every row tile): as AVX-512 does.
size_t avx2_f16_prep_bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
void avx2_f16_prepare(const float* x, int64_t n, uint8_t* out) {
  auto* o = reinterpret_cast<float*>(out);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) o[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

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
template <int RB, int TB> using Q5_0Tile = x86::Q5_0Tile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q8_0Tile = x86::Q8_0Tile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q4_KTile = x86::Q4_KTile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q5_KTile = x86::Q5_KTile<Avx2Ops, RB, TB>;
template <int RB, int TB> using Q6_KTile = x86::Q6_KTile<Avx2Ops, RB, TB>;

struct V256 {
  using Reg = __m256;
  static constexpr int kWidth = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg fma(Reg a, Reg b, Reg acc) { return _mm256_fmadd_ps(a, b, acc); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static float sum(Reg v) { return hsum256(v); }
};
struct LoadF32 {
  static __m256 load(const uint8_t* p, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i); }
  static float one(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static __m256 load(const uint8_t* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float one(const uint8_t* p, int64_t i) { return f16(reinterpret_cast<const uint16_t*>(p)[i]); }
};

// bf16 is the top half of an f32: widen to 32 bits and shift into place.
struct LoadBF16 {
  static __m256 load(const uint8_t* p, int64_t i) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float one(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};

template <int RB, int TB> using F32Tile = FloatTiles<V256, LoadF32>::Tile<RB, TB>;
template <int RB, int TB> using BF16Tile = FloatTiles<V256, LoadBF16>::Tile<RB, TB>;
template <int RB, int TB> using F16Tile = FloatTiles<V256, LoadF16>::Tile<RB, TB>;
template <int RB, int TB> using F16xF32Tile = FloatTiles<V256, LoadF16, LoadF32>::Tile<RB, TB>;

// One token, the same bits as the F16 tiles (one FMA chain per row, as they sum it).
void f16_gemv(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  gemm_tiled<F16xF32Tile>(w, wrb, nrows, xp, avx2_f16_prep_bytes(n), 1, n, y, nrows);
}

// One token without the batch-invariance promise: see x86::f16_dot_row (AVX-512's design at 8
// lanes).
void f16_gemv_fast(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  const auto* x = reinterpret_cast<const float*>(xp);
  for (int64_t r = 0; r < nrows; ++r) y[r] = x86::f16_dot_row<V256, LoadF16, LoadF32>(w + static_cast<size_t>(r) * wrb, x, n);
}

// IEEE halves by F16C: round-to-nearest-even both ways, tensor/f16.h's bits.
void to_half(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
void to_float(const uint16_t* h, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(h[i]);
}
constexpr HalfFns kHalf{to_half, to_float};

}  // namespace

const HalfFns* avx2_half() { return &kHalf; }

Kernels lookup_avx2(DType w) {
  switch (w) {
    case DType::Q4_0: return {gemm_tiled<Q4_0Tile>};
    case DType::Q5_0: return {gemm_tiled<Q5_0Tile>};
    case DType::Q8_0: return {gemm_tiled<Q8_0Tile>};
    case DType::Q4_K: return {gemm_tiled<Q4_KTile>};
    case DType::Q5_K: return {gemm_tiled<Q5_KTile>};
    case DType::Q6_K: return {gemm_tiled<Q6_KTile>};
    case DType::F32: return {gemm_tiled<F32Tile>};
    case DType::BF16: return {gemm_tiled<BF16Tile>};
    case DType::F16: {
      Kernels k{gemm_tiled<F16Tile>, avx2_f16_prep_bytes, avx2_f16_prepare, f16_gemv, gemm_tiled<F16xF32Tile>};
      k.gemv_fast = f16_gemv_fast;
      k.prepare_one_token_only = true;
      return k;
    }
    default: return {};
  }
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
