// Causal attention for one KV head on AVX-512 (see tensor/attention.h), in three steps per
// tile of up to 12 query rows:
//   S = Q·Kᵀ      keys as the cache keeps them, in panels of 32 positions × head_dim,
//                 transposed, and the queries broadcast past them (avx512_panels.h's micro-tile);
//                 scores past a row's last position come from a panel's other lanes (zeros or
//                 older keys) and are overwritten with zeros below;
//   P = softmax(scale · S) over each row's visible positions, zero beyond;
//   O = P·V       values read in place (a position's head is whole registers), the
//                 probabilities broadcast: up to 6 rows × 64 dims of accumulators.
// Every output is a fixed FMA chain (over dims for S, over positions for O, where the zeros
// past a row's end add nothing), so it does not depend on which rows share a tile.
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_exp.h"
#include "tensor/kernels/avx512_panels.h"

namespace orchard::kernels {
namespace {

using namespace panels;

constexpr int kMixRows = 6;  // 6 rows × 4 registers of dims = 24 accumulators

// out[r][16·j …] = Σ_{p < np} P[r·ps + p] · V(p)[16·j …] for r < R, j < DV.
template <int R, int DV>
void mix_tile(const float* P, int64_t ps, int64_t np, const float* v, int64_t vs, float* const* out) {
  __m512 acc[R][DV];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < DV; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    __m512 vv[DV];
    for (int j = 0; j < DV; ++j) vv[j] = _mm512_loadu_ps(v + p * vs + 16 * j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(P[r * ps + p]);
      for (int j = 0; j < DV; ++j) acc[r][j] = _mm512_fmadd_ps(vv[j], b, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < DV; ++j) _mm512_storeu_ps(out[r] + 16 * j, acc[r][j]);
}

using MixFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float* const*);
template <int R>
constexpr std::array<MixFn, 4> mix_row() {
  return {mix_tile<R, 1>, mix_tile<R, 2>, mix_tile<R, 3>, mix_tile<R, 4>};
}
// kMix[R - 1][DV - 1] is mix_tile<R, DV>.
constexpr std::array<std::array<MixFn, 4>, kMixRows> kMix{mix_row<1>(), mix_row<2>(), mix_row<3>(),
                                                           mix_row<4>(), mix_row<5>(), mix_row<6>()};

// s[0, n) = softmax(scale · s): one pass for the maximum, one for e^(scale·s − scale·max) and
// its sum (16 lanes, then the lanes), one to normalize. The order is fixed by n alone.
void softmax_scaled(float* s, int64_t n, float scale) {
  if (n <= 0) return;
  const auto tail = [&](int64_t i) { return static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1); };
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) mx = _mm512_mask_max_ps(mx, tail(i), mx, _mm512_maskz_loadu_ps(tail(i), s + i));
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(mx) * scale);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(i);
    const __m512 e = exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, s + i), vscale, shift));
    sum = _mm512_mask_add_ps(sum, m, sum, e);
    _mm512_mask_storeu_ps(s + i, m, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(s + i, tail(i), _mm512_mul_ps(_mm512_maskz_loadu_ps(tail(i), s + i), inv));
}

void attend_avx512(const AttendArgs& a) {
  static_assert(kPanelRows == kKeyPanel, "the key cache's panels are the score tile's panels");
  const int64_t hd = a.head_dim, rows = a.ntok * a.group;
  int64_t longest = 0;
  for (int64_t t = 0; t < a.ntok; ++t) longest = std::max(longest, a.len[t]);
  const int64_t n_panels = (longest + kPanelRows - 1) / kPanelRows, ld = n_panels * kPanelRows;
  thread_local std::vector<float> qt, s;
  qt.resize(static_cast<size_t>(kTokenTile * hd));
  s.resize(static_cast<size_t>(kTokenTile * ld));
  const auto offset = [&](int64_t i) { return (i / a.group) * a.tok_stride + (i % a.group) * hd; };
  for (int64_t i0 = 0; i0 < rows; i0 += kTokenTile) {
    const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, rows - i0));
    pack_tiles([&](int64_t r) { return a.q + offset(i0 + r); }, tb, static_cast<int>(hd), qt.data());
    int64_t np = 0;  // the longest visible run among these rows
    for (int r = 0; r < tb; ++r) np = std::max(np, a.len[(i0 + r) / a.group]);
    for (int64_t pi = 0; pi * kPanelRows < np; ++pi)
      kTiles[tb - 1](a.k + pi * hd * kPanelRows, static_cast<int>(hd), qt.data(), s.data() + pi * kPanelRows,
                     ld, true, 0xFFFF, 0xFFFF);
    for (int r = 0; r < tb; ++r) {
      const int64_t len = a.len[(i0 + r) / a.group];
      float* sr = s.data() + r * ld;
      softmax_scaled(sr, len, a.scale);
      std::fill(sr + len, sr + np, 0.0f);
    }
    for (int r0 = 0; r0 < tb; r0 += kMixRows) {
      const int nr = std::min(kMixRows, tb - r0);
      for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        float* outs[kMixRows];
        for (int r = 0; r < nr; ++r) outs[r] = a.out + offset(i0 + r0 + r) + d0;
        const int dv = static_cast<int>(std::min<int64_t>(4, (hd - d0) / 16));
        kMix[nr - 1][dv - 1](s.data() + r0 * ld, ld, np, a.v + d0, a.kv_stride, outs);
      }
    }
  }
}

}  // namespace

AttendFn avx512_attend() { return attend_avx512; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
