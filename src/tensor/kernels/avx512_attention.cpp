// Causal attention for KV heads on AVX-512 (see tensor/attention.h), in three steps per
// tile of up to 12 query rows:
//   S = Q·Kᵀ      keys as the cache keeps them, in panels of 32 positions × head_dim,
//                 transposed, and the queries broadcast past them (avx512_panels.h's micro-tile,
//                 over the panels widened to floats first when the cache holds halves);
//                 scores past a row's last position come from a panel's other lanes (zeros or
//                 older keys) and are overwritten with zeros below;
//   P = softmax(scale · S) over each row's visible positions, zero beyond;
//   O = P·V       values read in place (a position's head is whole registers, widened from
//                 halves as they load when the cache holds halves), the
//                 probabilities broadcast: up to 6 rows × 64 dims of accumulators.
// Every output is a fixed FMA chain (over dims for S, over positions for O, where the zeros
// past a row's end add nothing), so it does not depend on which rows share a tile.
// One token (a decoding step) takes its own path over all the call's KV heads: the same chains,
// but several panels or heads per pass, since a token's few rows alone left the FMA units
// waiting on latency.
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/kernels/attend_heads.h"
#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_exp.h"
#include "tensor/kernels/avx512_panels.h"

namespace orchard::kernels {
namespace {

using namespace panels;

constexpr int kMixRows = 6;  // 6 rows × 4 registers of dims = 24 accumulators

// 16 cache elements at p as floats: T is float or uint16_t (IEEE halves).
template <class T>
inline __m512 load16(const T* p) {
  if constexpr (sizeof(T) == 2) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  else return _mm512_loadu_ps(p);
}

// out[r][16·j …] = Σ_{p < np} P[r·ps + p] · V(p)[16·j …] for r < R, j < DV.
template <class T, int R, int DV>
void mix_tile(const float* P, int64_t ps, int64_t np, const T* v, int64_t vs, float* const* out) {
  __m512 acc[R][DV];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < DV; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    __m512 vv[DV];
    for (int j = 0; j < DV; ++j) vv[j] = load16(v + p * vs + 16 * j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(P[r * ps + p]);
      for (int j = 0; j < DV; ++j) acc[r][j] = _mm512_fmadd_ps(vv[j], b, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < DV; ++j) _mm512_storeu_ps(out[r] + 16 * j, acc[r][j]);
}

template <class T>
using MixFn = void (*)(const float*, int64_t, int64_t, const T*, int64_t, float* const*);
template <class T, int R>
constexpr std::array<MixFn<T>, 4> mix_row() {
  return {mix_tile<T, R, 1>, mix_tile<T, R, 2>, mix_tile<T, R, 3>, mix_tile<T, R, 4>};
}
// kMix<T>[R - 1][DV - 1] is mix_tile<T, R, DV>.
template <class T>
constexpr std::array<std::array<MixFn<T>, 4>, kMixRows> kMix{mix_row<T, 1>(), mix_row<T, 2>(), mix_row<T, 3>(),
                                                              mix_row<T, 4>(), mix_row<T, 5>(), mix_row<T, 6>()};

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

// Scores of R query rows (hd apart at q) against NP key panels (at k, one after another):
// s[r·ld + 32·p + lane]. Each score is the FMA chain over dims that panel_tile makes, so the same
// bits; one token's few rows read in place, and several panels per pass give 2·R·NP chains.
template <class T, int R, int NP>
void score_rows(const T* k, int64_t hd, const float* q, float* s, int64_t ld) {
  __m512 acc[R][NP][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < hd; ++c) {
    __m512 w[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      w[p][0] = load16(k + p * hd * kPanelRows + c * kPanelRows);
      w[p][1] = load16(k + p * hd * kPanelRows + c * kPanelRows + 16);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(q[r * hd + c]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        acc[r][p][0] = _mm512_fmadd_ps(w[p][0], b, acc[r][p][0]);
        acc[r][p][1] = _mm512_fmadd_ps(w[p][1], b, acc[r][p][1]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < NP; ++p) {
      _mm512_storeu_ps(s + r * ld + p * kPanelRows, acc[r][p][0]);
      _mm512_storeu_ps(s + r * ld + p * kPanelRows + 16, acc[r][p][1]);
    }
}

template <class T>
using ScoreFn = void (*)(const T*, int64_t, const float*, float*, int64_t);
constexpr int kScoreAcc = 12;  // R·NP pairs of accumulators
// kScore<T>[R - 1][NP - 1] is score_rows<T, R, NP> (R·NP ≤ kScoreAcc; the rest are never picked).
template <class T, int R>
constexpr std::array<ScoreFn<T>, 4> score_row() {
  return {score_rows<T, R, 1>, score_rows<T, R, 2>, score_rows<T, R, std::min(3, kScoreAcc / R)>,
          score_rows<T, R, std::min(4, kScoreAcc / R)>};
}
template <class T>
constexpr std::array<std::array<ScoreFn<T>, 4>, 4> kScore{score_row<T, 1>(), score_row<T, 2>(), score_row<T, 3>(),
                                                           score_row<T, 4>()};

// The mix of H heads × G rows: out[(h·G + g)·hd + 16·j …] = Σ_{p < np} P[(h·G + g)·ld + p] ·
// V(p)[h·hd + 16·j …], j < DV — mix_tile's FMA chain for every output, so the same bits, with
// G·H·DV chains side by side instead of G·DV.
template <class T, int G, int H, int DV>
void mix_heads(const float* P, int64_t ld, int64_t np, const T* v, int64_t vs, int64_t hd, float* out) {
  if constexpr (G * H * DV <= 24) {
    __m512 acc[H][G][DV];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
      for (int g = 0; g < G; ++g)
        for (int j = 0; j < DV; ++j) acc[h][g][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; ++p) {
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        __m512 vv[DV];
#pragma GCC unroll 4
        for (int j = 0; j < DV; ++j) vv[j] = load16(v + p * vs + h * hd + 16 * j);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const __m512 b = _mm512_set1_ps(P[(h * G + g) * ld + p]);
#pragma GCC unroll 4
          for (int j = 0; j < DV; ++j) acc[h][g][j] = _mm512_fmadd_ps(vv[j], b, acc[h][g][j]);
        }
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
      for (int g = 0; g < G; ++g)
        for (int j = 0; j < DV; ++j) _mm512_storeu_ps(out + (h * G + g) * hd + 16 * j, acc[h][g][j]);
  }
}

template <class T>
using MixHeadsFn = void (*)(const float*, int64_t, int64_t, const T*, int64_t, int64_t, float*);
template <class T, int G, int H>
constexpr std::array<MixHeadsFn<T>, 4> mix_heads_dv() {
  return {mix_heads<T, G, H, 1>, mix_heads<T, G, H, 2>, mix_heads<T, G, H, 3>, mix_heads<T, G, H, 4>};
}
template <class T, int G>
constexpr std::array<std::array<MixHeadsFn<T>, 4>, 4> mix_heads_h() {
  return {mix_heads_dv<T, G, 1>(), mix_heads_dv<T, G, 2>(), mix_heads_dv<T, G, 3>(), mix_heads_dv<T, G, 4>()};
}
// kMixHeads<T>[log2 G][H - 1][DV - 1] is mix_heads<T, G, H, DV>, for groups of 1, 2 and 4.
template <class T>
constexpr std::array<std::array<std::array<MixHeadsFn<T>, 4>, 4>, 3> kMixHeads{mix_heads_h<T, 1>(), mix_heads_h<T, 2>(),
                                                                                mix_heads_h<T, 4>()};

bool token_path(int64_t group) { return group == 1 || group == 2 || group == 4; }

// One token against every KV head of the call: a decoding step. The per-head path ran 2·group
// FMA chains per pass there and waited on their latency; here a pass covers several panels
// (scores) or several heads (mix).
template <class T>
void attend_token(const AttendArgs& a) {
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const int64_t hd = a.head_dim, G = a.group, rows = a.n_kv * G, len = a.len[0];
  const int64_t n_panels = (len + kPanelRows - 1) / kPanelRows, ld = n_panels * kPanelRows;
  thread_local std::vector<float> s;
  grow(s, rows * ld);
  const int R = static_cast<int>(std::min<int64_t>(G, 4)), per_pass = std::min(4, kScoreAcc / R);
  for (int64_t h = 0; h < a.n_kv; ++h)
    for (int64_t g0 = 0; g0 < G; g0 += R)
      for (int64_t pi = 0; pi < n_panels; pi += per_pass) {
        const int n = static_cast<int>(std::min<int64_t>(per_pass, n_panels - pi));
        const int64_t row = h * G + g0;
        kScore<T>[R - 1][n - 1](k + h * a.k_head_stride + pi * hd * kPanelRows, hd, a.q + row * hd,
                             s.data() + row * ld + pi * kPanelRows, ld);
      }
  for (int64_t r = 0; r < rows; ++r) softmax_scaled(s.data() + r * ld, len, a.scale);
  const int gi = G == 1 ? 0 : G == 2 ? 1 : 2;
  for (int64_t d0 = 0; d0 < hd; d0 += 64) {
    const int dv = static_cast<int>(std::min<int64_t>(4, (hd - d0) / 16));
    const int most = static_cast<int>(std::min<int64_t>(4, 24 / (G * dv)));
    for (int64_t h0 = 0; h0 < a.n_kv; h0 += most) {
      const int nh = static_cast<int>(std::min<int64_t>(most, a.n_kv - h0));
      kMixHeads<T>[gi][nh - 1][dv - 1](s.data() + h0 * G * ld, ld, len, v + h0 * hd + d0, a.kv_stride, hd,
                                    a.out + h0 * G * hd + d0);
    }
  }
}

template <class T>
void attend_head(const AttendArgs& a) {
  static_assert(kPanelRows == kKeyPanel, "the key cache's panels are the score tile's panels");
  const int64_t hd = a.head_dim, rows = a.ntok * a.group;
  int64_t longest = 0;
  for (int64_t t = 0; t < a.ntok; ++t) longest = std::max(longest, a.len[t]);
  const int64_t n_panels = (longest + kPanelRows - 1) / kPanelRows, ld = n_panels * kPanelRows;
  thread_local std::vector<float> qt, s, widened;
  grow(qt, kTokenTile * hd);
  grow(s, kTokenTile * ld);
  const T* v = static_cast<const T*>(a.v);
  const float* k = static_cast<const float*>(a.k);
  if constexpr (sizeof(T) == 2) {  // the panels this call reads, once, for the float micro-tile
    grow(widened, ld * hd);
    avx512_half()->to_float(static_cast<const uint16_t*>(a.k), widened.data(), ld * hd);
    k = widened.data();
  }
  const auto offset = [&](int64_t i) { return (i / a.group) * a.tok_stride + (i % a.group) * hd; };
  for (int64_t i0 = 0; i0 < rows; i0 += kTokenTile) {
    const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, rows - i0));
    pack_tiles([&](int64_t r) { return a.q + offset(i0 + r); }, tb, static_cast<int>(hd), qt.data());
    int64_t np = 0;  // the longest visible run among these rows
    for (int r = 0; r < tb; ++r) np = std::max(np, a.len[(i0 + r) / a.group]);
    for (int64_t pi = 0; pi * kPanelRows < np; ++pi)
      kTiles<float>[tb - 1](k + pi * hd * kPanelRows, static_cast<int>(hd), qt.data(), s.data() + pi * kPanelRows,
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
        kMix<T>[nr - 1][dv - 1](s.data() + r0 * ld, ld, np, v + d0, a.kv_stride, outs);
      }
    }
  }
}

template <class T>
void attend_as(const AttendArgs& a) {
  if (a.ntok == 1 && token_path(a.group)) return attend_token<T>(a);
  each_kv_head<T>(a, [](const AttendArgs& h) { attend_head<T>(h); });
}

void attend_avx512(const AttendArgs& a) {
  if (a.kv_type == KVType::F16) return attend_as<uint16_t>(a);
  attend_as<float>(a);
}

}  // namespace

AttendFn avx512_attend() { return attend_avx512; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
