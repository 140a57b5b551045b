#pragma once
// The kernels over half_column_groups.h's layout in 16-row groups, written once over a vector
// type of 4 or 8 floats (AVX2: avx2_f16_packed.cpp, NEON: neon_f16_packed.cpp; AVX-512 has its
// own at 32 rows). A column of a group is 16/kWidth registers of rows, so a prompt runs as an
// outer product: per column, the group's rows against up to six broadcast activations; one token
// reads a thread's rows as one stream.
//
// Rounding: every output is one FMA chain over the columns in order, from zero, whatever the
// token count, the tiling or the thread split (partial sums parked in y between column blocks
// are floats, so the chain resumes exactly); the activations are the f32 values rounded through
// fp16 that the ISA's other F16 kernels use. So the layout serves every token count with the
// same bits and the original rows can go.
//
// Include after the ISA's target switch, with <algorithm>, <array>, <utility> and <vector>
// included before it. V supplies Reg, kWidth, zero(), splat(x), load(const float*),
// load(const uint16_t*) (halves widened), store(float*, r), fma(a, b, acc) = a·b + acc,
// prefetch(p) (into L1) and prefetch_l2(p).
#include "tensor/kernels/half_column_groups.h"
#include "tensor/kernels/kernels.h"

namespace orchard::kernels::half_groups {

constexpr int kGroupRows = 16;
constexpr int kTokenTile = 6;    // AVX2: 12 accumulators + 2 weights + 1 broadcast of 16 registers
constexpr int kBlockCols = 256;  // an 8 KB fp16 panel and a 6 KB token tile share L1

// One token over K groups side by side (g: the first's first column, each next n columns on):
// y[16k + i] = Σ_c w_k[c][i] · x[c], one FMA chain per register of rows, asking for the weights
// 4 KB ahead as the other one-token kernels do. Four groups (four streams): two chains per group
// wait on the FMA latency every 32 bytes at 8 lanes, below what one core reads from memory (1b
// F16 on AVX2, 1 thread: one group 7.0-8.0 t/s, two 9.4-10.4, four 9.9-10.0 against two's
// 8.8-9.3).
template <class V, int K>
void groups_one_token(const uint16_t* g, int64_t n, const float* x, float* y) {
  constexpr int J = kGroupRows / V::kWidth;
  typename V::Reg a[K * J];
#pragma GCC unroll 16
  for (int i = 0; i < K * J; ++i) a[i] = V::zero();
  for (int64_t c = 0; c < n; ++c) {
    const typename V::Reg b = V::splat(x[c]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const uint16_t* p = g + k * n * kGroupRows + c * kGroupRows;
      if (c % 2 == 0) V::prefetch(reinterpret_cast<const char*>(p) + kStreamAhead);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) a[k * J + j] = V::fma(V::load(p + j * V::kWidth), b, a[k * J + j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < K * J; ++i) V::store(y + V::kWidth * i, a[i]);
}

// y[t·ldy + r] (+)= Σ_c panel[c][r] · xt[c·TB + t] for the group's 16 rows: one FMA chain per
// output over c in order, continued from y unless `first`.
template <class V, int TB>
void group_tile(const uint16_t* panel, int kc, const float* xt, float* y, int64_t ldy, bool first) {
  constexpr int J = kGroupRows / V::kWidth;
  typename V::Reg a[TB][J];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) a[t][j] = first ? V::zero() : V::load(y + t * ldy + j * V::kWidth);
  for (int c = 0; c < kc; ++c) {
    typename V::Reg w[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) w[j] = V::load(panel + c * kGroupRows + j * V::kWidth);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const typename V::Reg b = V::splat(xt[c * TB + t]);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) a[t][j] = V::fma(w[j], b, a[t][j]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) V::store(y + t * ldy + j * V::kWidth, a[t][j]);
}

using TileFn = void (*)(const uint16_t*, int, const float*, float*, int64_t, bool);
template <class V, int... TB>
constexpr std::array<TileFn, sizeof...(TB)> tile_table(std::integer_sequence<int, TB...>) {
  return {group_tile<V, TB + 1>...};
}
template <class V>
constexpr auto kTiles = tile_table<V>(std::make_integer_sequence<int, kTokenTile>{});  // [tb - 1]

// Operand tiles: for each tile of up to six tokens, xt[c·tb + t] = token(t0 + t)[k0 + c],
// tiles one after another (read in place, rows a multiple of 4 KB apart would share L1 sets).
inline void pack_tiles(const float* x, int64_t xs, int64_t ntok, int64_t k0, int kc, float* xt) {
  for (int64_t t0 = 0; t0 < ntok; t0 += kTokenTile) {
    const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t0));
    for (int t = 0; t < tb; ++t) {
      const float* src = x + (t0 + t) * xs + k0;
      for (int c = 0; c < kc; ++c) xt[c * tb + t] = src[c];
    }
    xt += static_cast<int64_t>(tb) * kc;
  }
}

// Many tokens: column blocks outermost (every token's activations of a block, packed once, stay
// in L2 while this thread's groups pass), then each group's panel with the tokens tile by tile,
// the next group's panel requested into L2 meanwhile.
template <class V>
void gemm_tokens(const uint16_t* w, int64_t g0, int64_t g1, const uint8_t* xp, size_t xrb, int64_t ntok, int64_t n,
                 float* y, int64_t ldy) {
  thread_local std::vector<float> xt;
  xt.resize(static_cast<size_t>(ntok) * kBlockCols);
  const auto* x = reinterpret_cast<const float*>(xp);
  const int64_t xs = static_cast<int64_t>(xrb / sizeof(float));
  for (int64_t k0 = 0; k0 < n; k0 += kBlockCols) {
    const int kc = static_cast<int>(std::min<int64_t>(kBlockCols, n - k0));
    pack_tiles(x, xs, ntok, k0, kc, xt.data());
    for (int64_t g = g0; g < g1; ++g) {
      const uint16_t* panel = w + g * n * kGroupRows + k0 * kGroupRows;
      const int64_t r = (g - g0) * kGroupRows;
      if (g + 1 < g1) {
        const auto* next = reinterpret_cast<const char*>(panel + n * kGroupRows);
        for (int64_t b = 0; b < static_cast<int64_t>(kc) * kGroupRows * 2; b += 64) V::prefetch_l2(next + b);
      }
      for (int64_t t = 0; t < ntok; t += kTokenTile) {
        const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t));
        kTiles<V>[static_cast<size_t>(tb - 1)](panel, kc, xt.data() + t * kc, y + t * ldy + r, ldy, k0 == 0);
      }
    }
  }
}

// PackedGemmFn: rows r0..r1 are whole groups; y points at row r0's outputs.
template <class V>
void gemm(const uint8_t* wp, int64_t /*rows*/, int64_t r0, int64_t r1, const uint8_t* xp, size_t xrb, int64_t ntok,
          int64_t n, float* y, int64_t ldy) {
  const auto* w = reinterpret_cast<const uint16_t*>(wp);
  const int64_t g0 = r0 / kGroupRows, g1 = r1 / kGroupRows;
  if (ntok > 1) return gemm_tokens<V>(w, g0, g1, xp, xrb, ntok, n, y, ldy);
  const auto* x = reinterpret_cast<const float*>(xp);
  int64_t g = g0;
  for (; g + 4 <= g1; g += 4) groups_one_token<V, 4>(w + g * n * kGroupRows, n, x, y + (g - g0) * kGroupRows);
  for (; g < g1; ++g) groups_one_token<V, 1>(w + g * n * kGroupRows, n, x, y + (g - g0) * kGroupRows);
}

// The PackedKernels of an ISA whose vector type is V and whose F16 activations `prepare` writes
// as f32 values rounded through fp16.
template <class V>
constexpr PackedKernels packed_kernels(PrepBytesFn prep_bytes, PrepareFn prepare) {
  return {kGroupRows,    /*slab_cols=*/0, pack_bytes, pack<kGroupRows>, prep_bytes, prepare, gemm<V>,
          /*one_token=*/true, /*min_cols=*/0, /*gemm_many=*/nullptr, /*static_split=*/true};
}

}  // namespace orchard::kernels::half_groups
