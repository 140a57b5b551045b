// F16 matrices repacked at load into 16-row groups for AVX2: the layout of
// avx512_f16_packed.cpp at half the width, one layout for every token count.
//
// Rows are stored in groups of 16, a group column after column, each column the group's 16
// halves (32 bytes): packed[g][c][i] = W[16g + i][c]. A prompt then runs as an outer product:
// per column, the group's two registers of rows against up to six broadcast activations, 12 FMAs
// for 2 conversions, in 15 of AVX2's 16 registers. The row-major dot-product tiles it replaces
// converted both operands at every step and, at 4 × 4, needed 21 registers (measured 0.52–0.55×
// llama.cpp's AVX2 build for 1b F16 prompts). One token reads a thread's rows as one stream.
//
// Rounding: every output is one FMA chain over the columns in order, from zero, whatever the
// token count, the tiling or the thread split (partial sums parked in y between column blocks
// are floats, so the chain resumes exactly); the activations are the f32 values rounded through
// fp16 that avx2.cpp's F16 kernels use. So the layout serves every token count with the same
// bits and the original rows can go.
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "tensor/kernels/half_column_groups.h"
#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx2_target_begin.h"

namespace orchard::kernels {
namespace {

constexpr int kGroupRows = 16;   // two registers of rows
constexpr int kTokenTile = 6;    // 12 accumulators + 2 weights + 1 broadcast of 16 registers
constexpr int kBlockCols = 256;  // an 8 KB fp16 panel and a 6 KB token tile share L1

// Eight rows of a group's column as f32.
inline __m256 rows8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// One token over K groups side by side (g: the first's first column, each next n columns on):
// y[16k + i] = Σ_c w_k[c][i] · x[c], one FMA chain per register of rows, asking for the weights
// 4 KB ahead as the other one-token kernels do. Four groups (eight chains, four streams): two
// chains wait on the FMA latency every 32 bytes, below what one core reads from memory (1b F16,
// 1 thread: one group 7.0-8.0 t/s, two 9.4-10.4, four 9.9-10.0 against two's 8.8-9.3).
template <int K>
void groups_one_token(const uint16_t* g, int64_t n, const float* x, float* y) {
  __m256 a[2 * K];
#pragma GCC unroll 8
  for (int i = 0; i < 2 * K; ++i) a[i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < n; ++c) {
    const __m256 b = _mm256_set1_ps(x[c]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const uint16_t* p = g + k * n * kGroupRows + c * kGroupRows;
      if (c % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(p) + kStreamAhead, _MM_HINT_T0);
      a[2 * k] = _mm256_fmadd_ps(rows8(p), b, a[2 * k]);
      a[2 * k + 1] = _mm256_fmadd_ps(rows8(p + 8), b, a[2 * k + 1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < 2 * K; ++i) _mm256_storeu_ps(y + 8 * i, a[i]);
}

// y[t·ldy + r] (+)= Σ_c panel[c][r] · xt[c·TB + t] for the group's 16 rows: one FMA chain per
// output over c in order, continued from y unless `first`.
template <int TB>
void group_tile(const uint16_t* panel, int kc, const float* xt, float* y, int64_t ldy, bool first) {
  __m256 a0[TB], a1[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    a0[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ldy);
    a1[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ldy + 8);
  }
  for (int c = 0; c < kc; ++c) {
    const __m256 w0 = rows8(panel + c * kGroupRows), w1 = rows8(panel + c * kGroupRows + 8);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const __m256 b = _mm256_broadcast_ss(xt + c * TB + t);
      a0[t] = _mm256_fmadd_ps(w0, b, a0[t]);
      a1[t] = _mm256_fmadd_ps(w1, b, a1[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    _mm256_storeu_ps(y + t * ldy, a0[t]);
    _mm256_storeu_ps(y + t * ldy + 8, a1[t]);
  }
}

using TileFn = void (*)(const uint16_t*, int, const float*, float*, int64_t, bool);
template <int... TB>
constexpr std::array<TileFn, sizeof...(TB)> tile_table(std::integer_sequence<int, TB...>) {
  return {group_tile<TB + 1>...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTokenTile>{});  // [tb - 1]

// Operand tiles: for each tile of up to six tokens, xt[c·tb + t] = token(t0 + t)[k0 + c],
// tiles one after another (read in place, rows a multiple of 4 KB apart would share L1 sets).
void pack_tiles(const float* x, int64_t xs, int64_t ntok, int64_t k0, int kc, float* xt) {
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
        for (int64_t b = 0; b < static_cast<int64_t>(kc) * kGroupRows * 2; b += 64) _mm_prefetch(next + b, _MM_HINT_T1);
      }
      for (int64_t t = 0; t < ntok; t += kTokenTile) {
        const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t));
        kTiles[static_cast<size_t>(tb - 1)](panel, kc, xt.data() + t * kc, y + t * ldy + r, ldy, k0 == 0);
      }
    }
  }
}

// PackedGemmFn: rows r0..r1 are whole groups; y points at row r0's outputs.
void gemm(const uint8_t* wp, int64_t /*rows*/, int64_t r0, int64_t r1, const uint8_t* xp, size_t xrb, int64_t ntok,
          int64_t n, float* y, int64_t ldy) {
  const auto* w = reinterpret_cast<const uint16_t*>(wp);
  const int64_t g0 = r0 / kGroupRows, g1 = r1 / kGroupRows;
  if (ntok > 1) return gemm_tokens(w, g0, g1, xp, xrb, ntok, n, y, ldy);
  const auto* x = reinterpret_cast<const float*>(xp);
  int64_t g = g0;
  for (; g + 4 <= g1; g += 4) groups_one_token<4>(w + g * n * kGroupRows, n, x, y + (g - g0) * kGroupRows);
  for (; g < g1; ++g) groups_one_token<1>(w + g * n * kGroupRows, n, x, y + (g - g0) * kGroupRows);
}

const PackedKernels kGroups{kGroupRows,
                            /*slab_cols=*/0,
                            half_groups::pack_bytes,
                            half_groups::pack<kGroupRows>,
                            avx2_f16_prep_bytes,
                            avx2_f16_prepare,
                            gemm,
                            /*one_token=*/true,
                            /*min_cols=*/0,
                            /*gemm_many=*/nullptr,
                            /*static_split=*/true};

}  // namespace

const PackedKernels* avx2_f16_packed() { return &kGroups; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
