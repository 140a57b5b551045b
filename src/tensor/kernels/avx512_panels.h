#pragma once
// The AVX-512 outer-product GEMM pieces shared by the F16 kernels (row-major prompts, the
// repacked layout) and attention: a panel of 32 rows held transposed (one column = two
// registers, f32 or fp16), a micro-tile that streams up to 12 broadcast operands past it, and
// the packing on both sides. Include after
// avx512_target_begin.h, outside any namespace.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace orchard::kernels::panels {

constexpr int kPanelRows = 32;  // two registers of rows
constexpr int kTokenTile = 12;  // 24 accumulators + 2 weights + 1 broadcast of 32 registers

// Transposes 16 registers in place: r[i] lane j becomes r[j] lane i.
// Every loop here is unrolled: indexed in loops, the arrays would live on the stack.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // pairs of rows, interleaved within 128-bit lanes
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {  // quads of rows: lane L of u[4g+m] = rows 4g..4g+3 at column 4L+m
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 4
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

// panel[c·32 + r] = row r's element c as f32, for r < rows (rows ≥ `rows` are zero), c < kc.
// load(r, c0, mask) returns row r's elements c0 … c0+15 (lanes outside `mask` zero).
template <class Load>
inline void pack_panel(const Load& load, int rows, int kc, float* panel) {
  for (int half = 0; half < 2; ++half)
    for (int c0 = 0; c0 < kc; c0 += 16) {
      const __mmask16 cols = static_cast<__mmask16>(kc - c0 >= 16 ? 0xFFFF : (1u << (kc - c0)) - 1);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const int row = half * 16 + i;
        r[i] = row < rows ? load(row, c0, cols) : _mm512_setzero_ps();
      }
      transpose16(r);
      const int n = std::min(16, kc - c0);
#pragma GCC unroll 16
      for (int c = 0; c < n; ++c) _mm512_storeu_ps(panel + (c0 + c) * kPanelRows + half * 16, r[c]);
    }
}

// Masks for the two registers of a panel with `rows` rows.
inline __mmask16 low_mask(int rows) { return static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1); }
inline __mmask16 high_mask(int rows) {
  return static_cast<__mmask16>(rows >= 32 ? 0xFFFF : rows <= 16 ? 0 : (1u << (rows - 16)) - 1);
}

// Sixteen rows of a panel's column as f32: panels packed per call are f32 already; panels
// repacked at load (avx512_f16_packed.cpp) stay fp16 and widen here, which costs the tile
// nothing measurable (two conversions per 24 FMAs).
inline __m512 panel_rows(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 panel_rows(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// y[t·ldy + r] (+)= Σ_c panel[c][r] · xt[c·TB + t] for r < 32 (masked to the panel's rows).
// Each output is one FMA chain over c in order, continued from y unless `first`.
template <int TB, class P>
void panel_tile(const P* panel, int kc, const float* xt, float* y, int64_t ldy, bool first, __mmask16 m0,
                __mmask16 m1) {
  __m512 a0[TB], a1[TB];
#pragma GCC unroll 16
  for (int t = 0; t < TB; ++t) {
    a0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + t * ldy);
    a1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + t * ldy + 16);
  }
  for (int c = 0; c < kc; ++c) {
    const __m512 w0 = panel_rows(panel + c * kPanelRows);
    const __m512 w1 = panel_rows(panel + c * kPanelRows + 16);
#pragma GCC unroll 16
    for (int t = 0; t < TB; ++t) {
      const __m512 b = _mm512_set1_ps(xt[c * TB + t]);
      a0[t] = _mm512_fmadd_ps(w0, b, a0[t]);
      a1[t] = _mm512_fmadd_ps(w1, b, a1[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < TB; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, m0, a0[t]);
    _mm512_mask_storeu_ps(y + t * ldy + 16, m1, a1[t]);
  }
}

template <class P>
using TileFn = void (*)(const P*, int, const float*, float*, int64_t, bool, __mmask16, __mmask16);
template <class P, int... TB>
constexpr std::array<TileFn<P>, sizeof...(TB)> tile_table(std::integer_sequence<int, TB...>) {
  return {panel_tile<TB + 1, P>...};
}
// kTiles<P>[tb - 1] is panel_tile<tb, P>.
template <class P>
inline constexpr auto kTiles = tile_table<P>(std::make_integer_sequence<int, kTokenTile>{});

// Requests the outputs of the tile after (t, r0) — the next tokens of this panel, or the first
// ones of the next panel. A tile's outputs are rows a whole output row apart (8–32 KB) that no
// stream prefetcher predicts; read cold, they stalled the start of every tile (~a sixth of the
// tile's time in a 512-token F16 prompt), while the tile's ~3000 cycles of FMAs hide the fetch.
// Always inlined: GCC 12 finds a function that only prefetches free of effects and drops calls.
[[gnu::always_inline]] inline void prefetch_next_outputs(const float* y, int64_t ldy, int64_t ntok, int64_t nrows, int64_t t, int64_t r0) {
  int64_t tn = t + kTokenTile, rn = r0;
  if (tn >= ntok) tn = 0, rn = r0 + kPanelRows;
  if (rn >= nrows) return;
  const int64_t count = std::min<int64_t>(kTokenTile, ntok - tn);
  const int64_t lines = std::min<int64_t>(kPanelRows, nrows - rn) > 16 ? 2 : 1;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < lines; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(y + (tn + i) * ldy + rn + 16 * l), _MM_HINT_T0);
}

// Operand tiles for panel_tile: for each tile of up to 12 rows, xt[c·tb + t] = row(t0 + t)[c],
// c < kc, tiles one after another. Read in place, rows a multiple of 4 KB apart would fight
// over one L1 set.
// Sixteen columns at a time go through transpose16 (a scalar copy with a stride of tb floats
// was a twentieth of an F16 prompt's time).
template <class Row>
inline void pack_tiles(const Row& row, int64_t nrows, int kc, float* xt) {
  for (int64_t t0 = 0; t0 < nrows; t0 += kTokenTile) {
    const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, nrows - t0));
    const float* src[kTokenTile];
    for (int t = 0; t < tb; ++t) src[t] = row(t0 + t);
    const __mmask16 lanes = static_cast<__mmask16>((1u << tb) - 1);
    int c0 = 0;
    for (; c0 + 16 <= kc; c0 += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) r[t] = t < tb ? _mm512_loadu_ps(src[t] + c0) : _mm512_setzero_ps();
      transpose16(r);  // r[c] lane t = token t's column c0 + c
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(xt + (c0 + c) * tb, lanes, r[c]);
    }
    for (; c0 < kc; ++c0)
      for (int t = 0; t < tb; ++t) xt[c0 * tb + t] = src[t][c0];
    xt += static_cast<int64_t>(tb) * kc;
  }
}

}  // namespace orchard::kernels::panels
