#pragma once
// y = x·M over a LevelMatrix (tensor/level_matrix.h), written once over a vector type of 4, 8
// or 16 floats (AVX-512: avx512_attention.cpp, AVX2: avx2_attention.cpp, NEON:
// neon_attention.cpp). Outputs sit in the lanes, so no row needs a horizontal sum: a chunk of
// R registers of y stays in registers while every row of M streams past. Each lane does the
// reference's operations in the reference's order (level_matrix.cpp), hence its bits.
//
// Include after the ISA's target switch. V supplies Reg, kWidth (dividing 16), zero(), splat(x),
// load(const float*), store(float*, r), fma(a, b, acc) = a·b + acc and load_i8(const int8_t*):
// kWidth levels widened to floats.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/level_matrix.h"

namespace orchard::kernels::level_tiles {

// Calls chunk.template operator()<C>(c0) over [0, cols) in chunks of C registers of W columns:
// R while R fit, then halves (a narrow matrix still gets several chains in flight, not one).
template <int W, int R, class Chunk>
void each_chunk(int64_t cols, Chunk chunk) {
  int64_t c0 = 0;
  for (; c0 + R * W <= cols; c0 += R * W) chunk.template operator()<R>(c0);
  if constexpr (R > 1) {
    const int64_t rest = cols - c0;
    if (rest > 0) each_chunk<W, R / 2>(rest, [&]<int C>(int64_t c) { chunk.template operator()<C>(c0 + c); });
  }
}

// Groups along rows, T tokens: y_t[c] = Σ_r fl(x_t[r]·scale[r][g])·q[r][c] (+ Σ_r x_t[r]·offset[r][g]).
// xs: per token rows·groups scaled inputs, xs_stride apart; ox: per token `groups` offset sums.
template <class V, int T, int R>
void along_rows_chunk(const LevelMatrix& m, const float* xs, int64_t xs_stride, const float* ox, int64_t c0, float* y,
                      int64_t y_stride) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const int64_t groups = m.cols / 16;
  Reg acc[T][R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) acc[t][k] = V::zero();
  for (int64_t r = 0; r < m.rows; ++r) {
    const int8_t* q = m.q + r * m.cols + c0;
    Reg w[R];
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) w[k] = V::load_i8(q + k * W);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float* s = xs + t * xs_stride + r * groups + c0 / 16;
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) acc[t][k] = V::fma(V::splat(s[k * W / 16]), w[k], acc[t][k]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) {
      if (ox) acc[t][k] = V::add(acc[t][k], V::splat(ox[t * groups + (c0 + k * W) / 16]));
      V::store(y + t * y_stride + c0 + k * W, acc[t][k]);
    }
}

template <class V, int R1, int T, int RT>
void along_rows(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y, int64_t y_stride) {
  constexpr int W = V::kWidth;
  const int64_t groups = m.cols / 16, per = m.rows * groups;
  thread_local std::vector<float> xs, ox;
  xs.resize(static_cast<size_t>(n * per));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t g = 0; g < groups; ++g)
        xs[static_cast<size_t>(t * per + r * groups + g)] = x[t * x_stride + r] * m.scale[r * groups + g];
  if (m.offset) {
    ox.assign(static_cast<size_t>(n * groups), 0.0f);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          float& o = ox[static_cast<size_t>(t * groups + g)];
          o = std::fma(x[t * x_stride + r], m.offset[r * groups + g], o);
        }
  }
  int64_t t = 0;
  for (; t + T <= n; t += T) {
    const float* o = m.offset ? &ox[static_cast<size_t>(t * groups)] : nullptr;
    each_chunk<W, RT>(m.cols, [&]<int C>(int64_t c0) {
      along_rows_chunk<V, T, C>(m, &xs[static_cast<size_t>(t * per)], per, o, c0, y + t * y_stride, y_stride);
    });
  }
  for (; t < n; ++t) {
    const float* o = m.offset ? &ox[static_cast<size_t>(t * groups)] : nullptr;
    each_chunk<W, R1>(m.cols, [&]<int C>(int64_t c0) {
      along_rows_chunk<V, 1, C>(m, &xs[static_cast<size_t>(t * per)], per, o, c0, y + t * y_stride, y_stride);
    });
  }
}

// Groups along columns, T tokens: per group G of 16 rows, part = Σ_{r∈G} x_t[r]·q[r][c];
// y_t[c] += scale[G][c]·part (+ offset[G][c]·Σ_{r∈G} x_t[r]). xsum: per token rows/16 sums.
template <class V, int T, int R>
void along_columns_chunk(const LevelMatrix& m, const float* x, int64_t x_stride, const float* xsum, int64_t c0, float* y,
                         int64_t y_stride) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const int64_t n_groups = m.rows / 16;
  Reg acc[T][R], part[T][R];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) acc[t][k] = V::zero();
  for (int64_t g = 0; g < n_groups; ++g) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) part[t][k] = V::zero();
    for (int64_t r = 16 * g; r < 16 * g + 16; ++r) {
      const int8_t* q = m.q + r * m.cols + c0;
      Reg w[R];
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) w[k] = V::load_i8(q + k * W);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const Reg xr = V::splat(x[t * x_stride + r]);
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k) part[t][k] = V::fma(xr, w[k], part[t][k]);
      }
    }
    const float* s = m.scale + g * m.cols + c0;
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) {
      const Reg sk = V::load(s + k * W);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t][k] = V::fma(sk, part[t][k], acc[t][k]);
    }
    if (m.offset) {
      const float* o = m.offset + g * m.cols + c0;
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) {
        const Reg ok = V::load(o + k * W);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) acc[t][k] = V::fma(ok, V::splat(xsum[t * n_groups + g]), acc[t][k]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) V::store(y + t * y_stride + c0 + k * W, acc[t][k]);
}

template <class V, int R1, int T, int RT>
void along_columns(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y, int64_t y_stride) {
  constexpr int W = V::kWidth;
  const int64_t n_groups = m.rows / 16;
  thread_local std::vector<float> xsum;
  xsum.assign(static_cast<size_t>(n * n_groups), 0.0f);
  if (m.offset)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < m.rows; ++r) xsum[static_cast<size_t>(t * n_groups + r / 16)] += x[t * x_stride + r];
  int64_t t = 0;
  for (; t + T <= n; t += T)
    each_chunk<W, RT>(m.cols, [&]<int C>(int64_t c0) {
      along_columns_chunk<V, T, C>(m, x + t * x_stride, x_stride, &xsum[static_cast<size_t>(t * n_groups)], c0,
                                   y + t * y_stride, y_stride);
    });
  for (; t < n; ++t)
    each_chunk<W, R1>(m.cols, [&]<int C>(int64_t c0) {
      along_columns_chunk<V, 1, C>(m, x + t * x_stride, x_stride, &xsum[static_cast<size_t>(t * n_groups)], c0,
                                   y + t * y_stride, y_stride);
    });
}

// One token: R1 registers of outputs per pass; several: T tokens × RT registers, each level
// widened once for all T (a prompt's rows, or a batch's).
template <class V, int R1, int T, int RT>
void product(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y, int64_t y_stride) {
  if (m.groups == LevelGroups::kAlongRows) along_rows<V, R1, T, RT>(m, x, n, x_stride, y, y_stride);
  else along_columns<V, R1, T, RT>(m, x, n, x_stride, y, y_stride);
}

}  // namespace orchard::kernels::level_tiles
