// Causal attention for KV heads on AVX2 (see tensor/attention.h): avx512_attention.cpp's three
// steps at 8 lanes, for tiles of up to six query rows (a decoding step's group of query heads,
// or a prompt's rows):
//   S = Q·Kᵀ      the cache's key panels (32 positions × head_dim, transposed; widened to floats
//                 once per call when the cache holds halves) against the queries broadcast, 16
//                 positions a pass: 6 rows × 2 registers of accumulators;
//   P = softmax(scale · S) over each row's visible positions, zero beyond (a vector e^x: libm's
//                 expf per score was a fifth of the scalar attention's time);
//   O = P·V       values read in place (widened from halves as they load), probabilities
//                 broadcast: 6 rows × 16 dims of accumulators.
// Every output is a fixed FMA chain (over dims for S, over positions for O), so it does not
// depend on which rows share a tile: a decoding step and a prompt give a token the same bits.
// The scalar loop it replaces (model/blocks/gqa_attention.cpp) was ~15 % of a 1b F16 prompt at
// 2 threads.
#if defined(__x86_64__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/kernels/attend_heads.h"
#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/avx2_exp.h"

namespace orchard::kernels {
namespace {

constexpr int kRows = 6;        // query rows per tile: 12 accumulators + 2 operands + 1 broadcast
constexpr int64_t kPanel = 32;  // positions per key panel (tensor/attention.h's kKeyPanel)

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
inline float hsum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

// s[0, n) = softmax(scale · s): the maximum, then e^(scale·s − scale·max) and its sum (8 lanes,
// then the lanes), then the normalisation. A short last chunk goes through a padded copy, so the
// order is fixed by n alone.
void softmax_scaled(float* s, int64_t n, float scale) {
  if (n <= 0) return;
  const int64_t whole = n / 8 * 8;
  alignas(32) float tail[8];
  std::fill_n(tail, 8, -INFINITY);
  std::copy(s + whole, s + n, tail);
  __m256 mx = _mm256_load_ps(tail);
  for (int64_t i = 0; i < whole; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + i));
  const __m256 vscale = _mm256_set1_ps(scale), shift = _mm256_set1_ps(hmax(mx) * scale);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < whole; i += 8) {
    const __m256 e = exp256(_mm256_fmsub_ps(_mm256_loadu_ps(s + i), vscale, shift));
    sum = _mm256_add_ps(sum, e);
    _mm256_storeu_ps(s + i, e);
  }
  const __m256 et = exp256(_mm256_fmsub_ps(_mm256_load_ps(tail), vscale, shift));  // −∞ lanes: 0
  sum = _mm256_add_ps(sum, et);
  _mm256_store_ps(tail, et);
  std::copy(tail, tail + (n - whole), s + whole);
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
  for (int64_t i = 0; i < whole; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), inv));
  for (int64_t i = whole; i < n; ++i) s[i] *= _mm_cvtss_f32(_mm256_castps256_ps128(inv));
}

// 8 cache elements at p as floats: T is float or uint16_t (IEEE halves).
template <class T>
inline __m256 load8(const T* p) {
  if constexpr (sizeof(T) == 2) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  else return _mm256_loadu_ps(p);
}

// s[r][0, 16) = Σ_d k[d·32 + j] · q[r][d] for 16 positions j of a key panel (k: its first).
template <int R>
void score_tile(const float* k, int64_t hd, const float* const* q, float* const* s) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m256 w0 = _mm256_loadu_ps(k + d * kPanel), w1 = _mm256_loadu_ps(k + d * kPanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_broadcast_ss(q[r] + d);
      acc[r][0] = _mm256_fmadd_ps(w0, b, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, b, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(s[r], acc[r][0]);
    _mm256_storeu_ps(s[r] + 8, acc[r][1]);
  }
}

// out[r][0, 16) = Σ_{p < np} P[r][p] · V(p)[0, 16) (v: position 0's first dim, positions vs apart).
template <class T, int R>
void mix_tile(const float* const* P, int64_t np, const T* v, int64_t vs, float* const* out) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    const __m256 v0 = load8(v + p * vs), v1 = load8(v + p * vs + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_broadcast_ss(P[r] + p);
      acc[r][0] = _mm256_fmadd_ps(v0, b, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(v1, b, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(out[r], acc[r][0]);
    _mm256_storeu_ps(out[r] + 8, acc[r][1]);
  }
}

using ScoreFn = void (*)(const float*, int64_t, const float* const*, float* const*);
constexpr ScoreFn kScore[kRows] = {score_tile<1>, score_tile<2>, score_tile<3>, score_tile<4>, score_tile<5>, score_tile<6>};
template <class T>
using MixFn = void (*)(const float* const*, int64_t, const T*, int64_t, float* const*);
template <class T>
constexpr MixFn<T> kMix[kRows] = {mix_tile<T, 1>, mix_tile<T, 2>, mix_tile<T, 3>,
                                  mix_tile<T, 4>, mix_tile<T, 5>, mix_tile<T, 6>};

// One KV head: its ntok · group query rows, up to six at a time.
template <class T>
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
    for (int64_t p0 = 0; p0 < np; p0 += 16) {
      for (int r = 0; r < nr; ++r) sr[r] = s.data() + r * ld + p0;
      kScore[nr - 1](k + (p0 / kPanel) * hd * kPanel + p0 % kPanel, hd, q, sr);
    }
    for (int r = 0; r < nr; ++r) {
      const int64_t len = a.len[(i0 + r) / a.group];
      float* row = s.data() + r * ld;
      softmax_scaled(row, len, a.scale);
      std::fill(row + len, row + np, 0.0f);
    }
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
      float* out[kRows];
      for (int r = 0; r < nr; ++r) out[r] = a.out + offset(i0 + r) + d0;
      kMix<T>[nr - 1](pr, np, v + d0, a.kv_stride, out);
    }
  }
}

template <class T>
void attend_as(const AttendArgs& a) {
  each_kv_head<T>(a, [](const AttendArgs& h) { attend_head<T>(h); });
}

void attend_avx2(const AttendArgs& a) {
  if (a.kv_type == KVType::F16) return attend_as<uint16_t>(a);
  attend_as<float>(a);
}

}  // namespace

AttendFn avx2_attend() { return attend_avx2; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
