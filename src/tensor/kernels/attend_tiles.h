#pragma once
// Causal attention for KV heads (tensor/attention.h) written once over a vector type, for the
// ISAs whose registers hold 4 or 8 floats (AVX2: avx2_attention.cpp, NEON: neon_attention.cpp;
// AVX-512 keeps its own, tuned for a decoding step's few rows, avx512_attention.cpp). Three
// steps for tiles of up to six query rows (a decoding step's group of query heads, or a
// prompt's rows):
//   S = Q·Kᵀ      the cache's key panels (32 positions × head_dim, transposed; widened to floats
//                 once per call when the cache holds halves) against the queries broadcast, 16
//                 positions a pass: 6 rows × 16/kWidth registers of accumulators;
//   P = softmax(scale · S) over each row's visible positions, zero beyond (a vector e^x: libm's
//                 expf per score was a fifth of the scalar attention's time);
//   O = P·V       values read in place (widened from halves as they load), probabilities
//                 broadcast: 6 rows × 16 dims of accumulators.
// Every output is a fixed FMA chain (over dims for S, over positions for O), so it does not
// depend on which rows share a tile: a decoding step and a prompt give a token the same bits.
//
// Include after the ISA's target switch, with <algorithm>, <cmath>, <cstdint> and <vector>
// included before it. V supplies
//   Reg, kWidth (4 or 8), zero(), splat(x), load(const float*), load(const uint16_t*) (halves
//   widened), store(float*, r), fma(a, b, acc) = a·b + acc, fms(a, b, c) = a·b − c (one
//   rounding), add, mul, max, exp (within 2 ulp of expf; 0 below −87.3, NaN through),
//   hmax(r), hsum(r).
#include "tensor/kernels/attend_heads.h"

namespace orchard::kernels::attend_tiles {

constexpr int kRows = 6;        // query rows per tile
constexpr int64_t kPass = 16;   // positions (S) or dims (O) per pass
constexpr int64_t kPanel = 32;  // positions per key panel (tensor/attention.h's kKeyPanel)

// s[0, n) = softmax(scale · s): the maximum, then e^(scale·s − scale·max) and its sum (kWidth
// lanes, then the lanes), then the normalisation. A short last chunk goes through a padded
// copy, so the order is fixed by n alone.
template <class V>
void softmax_scaled(float* s, int64_t n, float scale) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  if (n <= 0) return;
  const int64_t whole = n / W * W;
  alignas(32) float tail[W];
  std::fill_n(tail, W, -INFINITY);
  std::copy(s + whole, s + n, tail);
  Reg mx = V::load(tail);
  for (int64_t i = 0; i < whole; i += W) mx = V::max(mx, V::load(s + i));
  const Reg vscale = V::splat(scale), shift = V::splat(V::hmax(mx) * scale);
  Reg sum = V::zero();
  for (int64_t i = 0; i < whole; i += W) {
    const Reg e = V::exp(V::fms(V::load(s + i), vscale, shift));
    sum = V::add(sum, e);
    V::store(s + i, e);
  }
  const Reg et = V::exp(V::fms(V::load(tail), vscale, shift));  // −∞ lanes: 0
  sum = V::add(sum, et);
  V::store(tail, et);
  std::copy(tail, tail + (n - whole), s + whole);
  const float inv = 1.0f / V::hsum(sum);
  const Reg vinv = V::splat(inv);
  for (int64_t i = 0; i < whole; i += W) V::store(s + i, V::mul(V::load(s + i), vinv));
  for (int64_t i = whole; i < n; ++i) s[i] *= inv;
}

// s[r][0, 16) = Σ_d k[d·32 + j] · q[r][d] for 16 positions j of a key panel (k: its first).
template <class V, int R>
void score_tile(const float* k, int64_t hd, const float* const* q, float* const* s) {
  constexpr int J = kPass / V::kWidth;
  typename V::Reg acc[R][J];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[r][j] = V::zero();
  for (int64_t d = 0; d < hd; ++d) {
    typename V::Reg w[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) w[j] = V::load(k + d * kPanel + j * V::kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename V::Reg b = V::splat(q[r][d]);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[r][j] = V::fma(w[j], b, acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) V::store(s[r] + j * V::kWidth, acc[r][j]);
}

// out[r][0, 16) = Σ_{p < np} P[r][p] · V(p)[0, 16) (v: position 0's first dim, positions vs apart).
template <class V, class T, int R>
void mix_tile(const float* const* P, int64_t np, const T* v, int64_t vs, float* const* out) {
  constexpr int J = kPass / V::kWidth;
  typename V::Reg acc[R][J];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[r][j] = V::zero();
  for (int64_t p = 0; p < np; ++p) {
    typename V::Reg x[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) x[j] = V::load(v + p * vs + j * V::kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename V::Reg b = V::splat(P[r][p]);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[r][j] = V::fma(x[j], b, acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) V::store(out[r] + j * V::kWidth, acc[r][j]);
}

template <class V>
using ScoreFn = void (*)(const float*, int64_t, const float* const*, float* const*);
template <class V>
constexpr ScoreFn<V> kScore[kRows] = {score_tile<V, 1>, score_tile<V, 2>, score_tile<V, 3>,
                                      score_tile<V, 4>, score_tile<V, 5>, score_tile<V, 6>};
template <class T>
using MixFn = void (*)(const float* const*, int64_t, const T*, int64_t, float* const*);
template <class V, class T>
constexpr MixFn<T> kMix[kRows] = {mix_tile<V, T, 1>, mix_tile<V, T, 2>, mix_tile<V, T, 3>,
                                  mix_tile<V, T, 4>, mix_tile<V, T, 5>, mix_tile<V, T, 6>};

// One KV head: its ntok · group query rows, up to six at a time (T: the cache's element type).
template <class V, class T>
void attend_head(const AttendArgs& a) {
  const int64_t hd = a.head_dim, rows = a.ntok * a.group;
  int64_t longest = 0;
  for (int64_t t = 0; t < a.ntok; ++t) longest = std::max(longest, a.len[t]);
  const int64_t ld = (longest + kPanel - 1) / kPanel * kPanel;
  thread_local std::vector<float> s, widened;
  grow(s, kRows * ld);
  const float* k = static_cast<const float*>(a.k);
  if constexpr (sizeof(T) == 2) {  // the panels this call reads, once, for the float tile
    grow(widened, ld * hd);
    to_floats(static_cast<const uint16_t*>(a.k), widened.data(), ld * hd);
    k = widened.data();
  }
  const T* v = static_cast<const T*>(a.v);
  const auto offset = [&](int64_t i) { return (i / a.group) * a.tok_stride + (i % a.group) * hd; };
  for (int64_t i0 = 0; i0 < rows; i0 += kRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kRows, rows - i0));
    const float* q[kRows];
    float* sr[kRows];
    const float* pr[kRows];
    int64_t np = 0;  // the longest visible run among these rows
    for (int r = 0; r < nr; ++r) {
      q[r] = a.q + offset(i0 + r);
      pr[r] = s.data() + r * ld;
      np = std::max(np, a.len[(i0 + r) / a.group]);
    }
    for (int64_t p0 = 0; p0 < np; p0 += kPass) {
      for (int r = 0; r < nr; ++r) sr[r] = s.data() + r * ld + p0;
      kScore<V>[nr - 1](k + (p0 / kPanel) * hd * kPanel + p0 % kPanel, hd, q, sr);
    }
    for (int r = 0; r < nr; ++r) {
      const int64_t len = a.len[(i0 + r) / a.group];
      float* row = s.data() + r * ld;
      softmax_scaled<V>(row, len, a.scale);
      std::fill(row + len, row + np, 0.0f);
    }
    for (int64_t d0 = 0; d0 < hd; d0 += kPass) {
      float* out[kRows];
      for (int r = 0; r < nr; ++r) out[r] = a.out + offset(i0 + r) + d0;
      kMix<V, T>[nr - 1](pr, np, v + d0, a.kv_stride, out);
    }
  }
}

// The AttendFn of an ISA whose vector type is V.
template <class V>
void attend(const AttendArgs& a) {
  if (a.kv_type == KVType::F16) return each_kv_head<uint16_t>(a, [](const AttendArgs& h) { attend_head<V, uint16_t>(h); });
  each_kv_head<float>(a, [](const AttendArgs& h) { attend_head<V, float>(h); });
}

}  // namespace orchard::kernels::attend_tiles
