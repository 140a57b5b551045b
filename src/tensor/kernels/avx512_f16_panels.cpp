// F16 weights times many tokens (prompt processing) as a blocked outer-product GEMM.
//
// The dot-product tiles of avx512.cpp convert every weight vector from fp16 for each tile and
// end each output with a horizontal sum: fine for one token, where memory is the limit, but a
// prompt is compute-bound. Here a thread converts a panel of 32 rows × 256 columns to f32 once,
// transposed so that one column of the panel (32 rows) is two registers, and then streams every
// token past it: per column, 2 loads and 2·TB FMAs against TB broadcast activations.
//
// Rounding: each output is one FMA chain over the columns in order (partial sums parked in y
// between column blocks are floats, so the chain is exact to resume). It therefore does not
// depend on the tiling, the thread split or the token count — but it differs from the
// one-token kernel's, so matmul leaves it out where a server needs batch-invariant bits.
#if defined(__x86_64__)
#include "tensor/kernels/kernels.h"

#include "tensor/kernels/avx512_target_begin.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace orchard::kernels {
namespace {

constexpr int kPanelRows = 32;   // two registers of rows
constexpr int kPanelCols = 256;  // 32 KB of f32 panel: stays in L1 while tokens stream past
constexpr int kTokenTile = 12;   // 24 accumulators + 2 weights + 1 broadcast of 32 registers

// Transposes 16 registers in place: r[i] lane j becomes r[j] lane i.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // pairs of rows, interleaved within 128-bit lanes
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // quads of rows: lane L of u[4g+m] = rows 4g..4g+3 at column 4L+m
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int m = 0; m < 4; ++m) {  // gather 128-bit lane L of the four quads: column 4L+m
    const __m512 v_even = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);  // lanes 0, 2
    const __m512 v_odd = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);   // lanes 1, 3
    const __m512 w_even = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
    const __m512 w_odd = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_f32x4(v_even, w_even, 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(v_even, w_even, 0xDD);
    r[4 + m] = _mm512_shuffle_f32x4(v_odd, w_odd, 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(v_odd, w_odd, 0xDD);
  }
}

// panel[c·32 + r] = W[r][k0 + c] as f32 for r < rows (rows ≥ `rows` are zero), c < kc.
void pack_panel(const uint8_t* w, size_t wrb, int rows, int64_t k0, int kc, float* panel) {
  for (int half = 0; half < 2; ++half)
    for (int c0 = 0; c0 < kc; c0 += 16) {
      const __mmask16 cols = static_cast<__mmask16>(kc - c0 >= 16 ? 0xFFFF : (1u << (kc - c0)) - 1);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const int row = half * 16 + i;
        if (row >= rows) {
          r[i] = _mm512_setzero_ps();
          continue;
        }
        const auto* src = reinterpret_cast<const uint16_t*>(w + row * wrb) + k0 + c0;
        r[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(cols, src));
      }
      transpose16(r);
      const int n = std::min(16, kc - c0);
      for (int c = 0; c < n; ++c) _mm512_store_ps(panel + (c0 + c) * kPanelRows + half * 16, r[c]);
    }
}

// y[t·ldy + r] (+)= Σ_c panel[c][r] · xt[c·TB + t] for r < 32 (masked to the panel's rows).
template <int TB>
void panel_tile(const float* panel, int kc, const float* xt, float* y, int64_t ldy, bool first, __mmask16 m0,
                __mmask16 m1) {
  __m512 a0[TB], a1[TB];
  for (int t = 0; t < TB; ++t) {
    a0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + t * ldy);
    a1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + t * ldy + 16);
  }
  for (int c = 0; c < kc; ++c) {
    const __m512 w0 = _mm512_load_ps(panel + c * kPanelRows);
    const __m512 w1 = _mm512_load_ps(panel + c * kPanelRows + 16);
#pragma GCC unroll 16
    for (int t = 0; t < TB; ++t) {
      const __m512 b = _mm512_set1_ps(xt[c * TB + t]);
      a0[t] = _mm512_fmadd_ps(w0, b, a0[t]);
      a1[t] = _mm512_fmadd_ps(w1, b, a1[t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, m0, a0[t]);
    _mm512_mask_storeu_ps(y + t * ldy + 16, m1, a1[t]);
  }
}

using TileFn = void (*)(const float*, int, const float*, float*, int64_t, bool, __mmask16, __mmask16);
template <int... TB>
constexpr std::array<TileFn, sizeof...(TB)> tile_table(std::integer_sequence<int, TB...>) {
  return {panel_tile<TB + 1>...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTokenTile>{});

// xt[tile][c·tb + t] = x[t0 + t][k0 + c]: each token tile's activations for one column block,
// interleaved so the kernel's broadcasts read one sequential stream. Read in place, the token
// rows lie a multiple of 4 KB apart and fight over one L1 set.
void pack_tokens(const float* x, int64_t xs, int64_t ntok, int64_t k0, int kc, float* xt) {
  for (int64_t t0 = 0; t0 < ntok; t0 += kTokenTile) {
    const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t0));
    for (int t = 0; t < tb; ++t) {
      const float* src = x + (t0 + t) * xs + k0;
      for (int c = 0; c < kc; ++c) xt[c * tb + t] = src[c];
    }
    xt += static_cast<int64_t>(tb) * kc;
  }
}

// GemmFn over activations from f16_prepare (f32 values rounded through fp16, `xrb` bytes apart);
// nb is the column count.
void f16_gemm_panels(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, size_t xrb, int64_t ntok,
                     int64_t nb, float* y, int64_t ldy) {
  alignas(64) float panel[kPanelCols * kPanelRows];
  thread_local std::vector<float> xt;
  xt.resize(static_cast<size_t>(ntok) * kPanelCols);
  const auto* x = reinterpret_cast<const float*>(xp);
  const int64_t xs = static_cast<int64_t>(xrb / sizeof(float));
  // Column blocks outermost: a block of every token's activations (ntok × 1 KB) stays in L2
  // while all of this thread's row panels pass. The partial sums in y and the next panel's
  // weights stay nowhere near: both are prefetched a tile ahead.
  const int64_t n_tiles = (ntok + kTokenTile - 1) / kTokenTile;
  for (int64_t k0 = 0; k0 < nb; k0 += kPanelCols) {
    const int kc = static_cast<int>(std::min<int64_t>(kPanelCols, nb - k0));
    const int64_t lines_per_row = (kc * 2 + 63) / 64;
    pack_tokens(x, xs, ntok, k0, kc, xt.data());
    for (int64_t r0 = 0; r0 < nrows; r0 += kPanelRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, nrows - r0));
      pack_panel(w + r0 * wrb, wrb, rows, k0, kc, panel);
      const __mmask16 m0 = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
      const __mmask16 m1 = static_cast<__mmask16>(rows >= 32 ? 0xFFFF : rows <= 16 ? 0 : (1u << (rows - 16)) - 1);
      const int64_t next_rows = std::min<int64_t>(kPanelRows, nrows - r0 - kPanelRows);
      const int64_t next_lines = next_rows > 0 ? next_rows * lines_per_row : 0;
      const int64_t lines_per_tile = (next_lines + n_tiles - 1) / n_tiles;
      int64_t line = 0;
      for (int64_t t = 0; t < ntok; t += kTokenTile) {
        const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t));
        if (k0 > 0)
          for (int64_t u = t + kTokenTile; u < std::min(ntok, t + 2 * kTokenTile); ++u) {
            _mm_prefetch(reinterpret_cast<const char*>(y + u * ldy + r0), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(y + u * ldy + r0 + 16), _MM_HINT_T0);
          }
        for (const int64_t end = std::min(next_lines, line + lines_per_tile); line < end; ++line) {
          const uint8_t* row = w + (r0 + kPanelRows + line / lines_per_row) * wrb + k0 * 2;
          _mm_prefetch(reinterpret_cast<const char*>(row + (line % lines_per_row) * 64), _MM_HINT_T0);
        }
        kTiles[tb - 1](panel, kc, xt.data() + t * kc, y + t * ldy + r0, ldy, k0 == 0, m0, m1);
      }
    }
  }
}

}  // namespace

void add_avx512_many(DType w, Kernels& k) {
  if (w == DType::F16 && k.prepare) k.gemm_many = f16_gemm_panels;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
