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

// Groups along rows: y[c] = Σ_r fl(x[r]·scale[r][g])·q[r][c] (+ Σ_r x[r]·offset[r][g]).
template <class V, int R>
void along_rows_chunk(const LevelMatrix& m, const float* xs, const float* ox, int64_t c0, float* y) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const int64_t groups = m.cols / 16;
  Reg acc[R];
  for (int k = 0; k < R; ++k) acc[k] = V::zero();
  for (int64_t r = 0; r < m.rows; ++r) {
    const int8_t* q = m.q + r * m.cols + c0;
    const float* s = xs + r * groups + c0 / 16;
    for (int k = 0; k < R; ++k) acc[k] = V::fma(V::splat(s[k * W / 16]), V::load_i8(q + k * W), acc[k]);
  }
  for (int k = 0; k < R; ++k) {
    if (ox) acc[k] = V::add(acc[k], V::splat(ox[(c0 + k * W) / 16]));
    V::store(y + c0 + k * W, acc[k]);
  }
}

template <class V, int R>
void along_rows(const LevelMatrix& m, const float* x, float* y) {
  constexpr int W = V::kWidth;
  const int64_t groups = m.cols / 16;
  thread_local std::vector<float> xs, ox;
  xs.resize(static_cast<size_t>(m.rows * groups));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) xs[static_cast<size_t>(r * groups + g)] = x[r] * m.scale[r * groups + g];
  if (m.offset) {
    ox.assign(static_cast<size_t>(groups), 0.0f);
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t g = 0; g < groups; ++g)
        ox[static_cast<size_t>(g)] = std::fma(x[r], m.offset[r * groups + g], ox[static_cast<size_t>(g)]);
  }
  const float* o = m.offset ? ox.data() : nullptr;
  each_chunk<W, R>(m.cols, [&]<int C>(int64_t c0) { along_rows_chunk<V, C>(m, xs.data(), o, c0, y); });
}

// Groups along columns: per group G of 16 rows, part = Σ_{r∈G} x[r]·q[r][c]; y[c] += scale[G][c]·part
// (+ offset[G][c]·Σ_{r∈G} x[r]).
template <class V, int R>
void along_columns_chunk(const LevelMatrix& m, const float* x, const float* xsum, int64_t c0, float* y) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  Reg acc[R], part[R];
  for (int k = 0; k < R; ++k) acc[k] = V::zero();
  for (int64_t g = 0; g < m.rows / 16; ++g) {
    for (int k = 0; k < R; ++k) part[k] = V::zero();
    for (int64_t r = 16 * g; r < 16 * g + 16; ++r) {
      const Reg xr = V::splat(x[r]);
      const int8_t* q = m.q + r * m.cols + c0;
      for (int k = 0; k < R; ++k) part[k] = V::fma(xr, V::load_i8(q + k * W), part[k]);
    }
    const float* s = m.scale + g * m.cols + c0;
    for (int k = 0; k < R; ++k) acc[k] = V::fma(V::load(s + k * W), part[k], acc[k]);
    if (m.offset) {
      const float* o = m.offset + g * m.cols + c0;
      const Reg xg = V::splat(xsum[g]);
      for (int k = 0; k < R; ++k) acc[k] = V::fma(V::load(o + k * W), xg, acc[k]);
    }
  }
  for (int k = 0; k < R; ++k) V::store(y + c0 + k * W, acc[k]);
}

template <class V, int R>
void along_columns(const LevelMatrix& m, const float* x, float* y) {
  constexpr int W = V::kWidth;
  thread_local std::vector<float> xsum;
  xsum.assign(static_cast<size_t>(m.rows / 16), 0.0f);
  if (m.offset)
    for (int64_t r = 0; r < m.rows; ++r) xsum[static_cast<size_t>(r / 16)] += x[r];
  each_chunk<W, R>(m.cols, [&]<int C>(int64_t c0) { along_columns_chunk<V, C>(m, x, xsum.data(), c0, y); });
}

template <class V, int R>
void product(const LevelMatrix& m, const float* x, float* y) {
  if (m.groups == LevelGroups::kAlongRows) along_rows<V, R>(m, x, y);
  else along_columns<V, R>(m, x, y);
}

}  // namespace orchard::kernels::level_tiles
