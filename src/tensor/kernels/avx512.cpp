// AVX-512 kernels (256-bit VNNI integer dots, 512-bit float FMAs) for x86-64 CPUs with
// AVX512F/BW/VL/VNNI (Ice Lake, Zen 4 and later). Compiled for that target whatever the build's
// -march, and only called when the CPU reports the features.
#if defined(__x86_64__)
#include "tensor/kernels/kernels.h"

#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/f16_dot_row.h"
#include "tensor/kernels/float_tiles.h"
#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/x86_int8_tiles.h"

namespace orchard::kernels {

// F16 weights against activations prepared as float32 values already rounded through fp16
// (exactly the reference's f16 activations), so each activation converts once per token
// instead of once per row.
size_t avx512_f16_prep_bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
void avx512_f16_prepare(const float* x, int64_t n, uint8_t* out) {
  auto* o = reinterpret_cast<float*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) o[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

namespace {

using x86::f16;

struct VnniOps {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

template <int RB, int TB> using Q4_0Tile = x86::Q4_0Tile<VnniOps, RB, TB>;
template <int RB, int TB> using Q5_0Tile = x86::Q5_0Tile<VnniOps, RB, TB>;
template <int RB, int TB> using Q8_0Tile = x86::Q8_0Tile<VnniOps, RB, TB>;
template <int RB, int TB> using Q4_KTile = x86::Q4_KTile<VnniOps, RB, TB>;
template <int RB, int TB> using Q5_KTile = x86::Q5_KTile<VnniOps, RB, TB>;
template <int RB, int TB> using Q6_KTile = x86::Q6_KTile<VnniOps, RB, TB>;

struct V512 {
  using Reg = __m512;
  static constexpr int kWidth = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg fma(Reg a, Reg b, Reg acc) { return _mm512_fmadd_ps(a, b, acc); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static float sum(Reg v) { return _mm512_reduce_add_ps(v); }
};

struct LoadF32 {
  static __m512 load(const uint8_t* p, int64_t i) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + i); }
  static float one(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static __m512 load(const uint8_t* p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float one(const uint8_t* p, int64_t i) { return f16(reinterpret_cast<const uint16_t*>(p)[i]); }
};

// bf16 is the top half of an f32: widen to 32 bits and shift into place.
struct LoadBF16 {
  static __m512 load(const uint8_t* p, int64_t i) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(p) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static float one(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};

template <int RB, int TB> using F32Tile = FloatTiles<V512, LoadF32>::Tile<RB, TB>;
template <int RB, int TB> using BF16Tile = FloatTiles<V512, LoadBF16>::Tile<RB, TB>;
template <int RB, int TB> using F16Tile = FloatTiles<V512, LoadF16>::Tile<RB, TB>;
template <int RB, int TB> using F16xF32Tile = FloatTiles<V512, LoadF16, LoadF32>::Tile<RB, TB>;

void f16_gemv(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  gemm_tiled<F16xF32Tile>(w, wrb, nrows, xp, avx512_f16_prep_bytes(n), 1, n, y, nrows);
}

// One token without the batch-invariance promise: see x86::f16_dot_row.
void f16_gemv_fast(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  const auto* x = reinterpret_cast<const float*>(xp);
  for (int64_t r = 0; r < nrows; ++r) y[r] = x86::f16_dot_row<V512, LoadF16, LoadF32>(w + r * wrb, x, n);
}

}  // namespace

Kernels lookup_avx512(DType w) {
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
      Kernels k{gemm_tiled<F16Tile>, avx512_f16_prep_bytes, avx512_f16_prepare, f16_gemv, gemm_tiled<F16xF32Tile>};
      k.gemv_fast = f16_gemv_fast;
      return k;
    }
    default: return {};
  }
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
