// F16 matrices repacked at load into 32-row panels for AVX-512: one layout for every token count.
//
// The row-major prompt kernel (avx512_f16_panels.cpp) transposes each 32-row × 256-column panel
// to f32 before streaming the tokens past it. In a 1b F16 prompt of 512 tokens that packing took
// 13–17 % of the time, nearly all of it waiting for the 32 rows' scattered lines. Here the
// transpose happens once, at load: rows are stored in groups of 32, a group column after column,
// each column the group's 32 halves — one 64-byte line:
//   packed[g][c][i] = W[32g + i][c]
// A panel is then 16 KB of consecutive lines that the tile widens as it reads them, and one
// token reads a thread's rows as one sequential stream (no horizontal sums either).
//
// Rounding: every output is one FMA chain over the columns in order, from zero, whatever the
// token count, the tiling or the thread split (partial sums parked in y between column blocks
// are floats, so the chain resumes exactly) — the chains of the row-major panels kernel. So the
// layout serves every token count with the same bits and the original rows can go.
#if defined(__x86_64__)
#include <algorithm>
#include <vector>

#include "tensor/kernels/half_column_groups.h"
#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_panels.h"

namespace orchard::kernels {
namespace {

using namespace panels;

// Columns per block of the many-token kernel: a 16 KB fp16 panel and a 12 KB token tile share L1.
constexpr int kBlockCols = 256;

// One token over one group (w: its first column): y[i] = Σ_c w[c][i] · x[c], two FMA chains.
// One group at a time keeps a thread's reads one stream. Against the column slabs this layout
// replaced (1b F16 generation, 1 thread): four groups side by side (eight chains, four streams)
// ~0.8× in separate runs, two 0.98× and one 1.04× in one process. Two chains retire
// a 64-byte line per FMA latency, ~16 B a cycle, more than memory feeds one core — provided the
// lines are already on their way: without asking 4 KB ahead the one-token pass ran at 0.75×.
void group_one_token(const uint16_t* w, int64_t n, const float* x, float* y) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (int64_t c = 0; c < n; ++c) {
    const uint16_t* col = w + c * kPanelRows;
    _mm_prefetch(reinterpret_cast<const char*>(col) + kStreamAhead, _MM_HINT_T0);
    const __m512 b = _mm512_set1_ps(x[c]);
    a0 = _mm512_fmadd_ps(panel_rows(col), b, a0);
    a1 = _mm512_fmadd_ps(panel_rows(col + 16), b, a1);
  }
  _mm512_storeu_ps(y, a0);
  _mm512_storeu_ps(y + 16, a1);
}

// Requests into L2 slice j of `slices` of the panel after (k0, group g): the next group's
// columns k0.., or the first group's next block. Always inlined: GCC 12 finds a function that
// only prefetches free of effects and drops calls to it.
[[gnu::always_inline]] inline void prefetch_next_panel(const uint16_t* w, int64_t n, int64_t g, int64_t g0,
                                                       int64_t g1, int64_t k0, int64_t j, int64_t slices) {
  int64_t gn = g + 1, kn = k0;
  if (gn >= g1) gn = g0, kn = k0 + kBlockCols;
  if (kn >= n) return;
  const auto* p = reinterpret_cast<const char*>(w + gn * n * kPanelRows + kn * kPanelRows);
  const int64_t lines = std::min<int64_t>(kBlockCols, n - kn);  // one line per column
  for (int64_t l = lines * j / slices; l < lines * (j + 1) / slices; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T1);
}

// Many tokens: column blocks outermost (every token's activations of a block, packed once, stay
// in L2 while this thread's groups pass), then each group's panel with the tokens tile by tile.
void gemm_tokens(const uint16_t* w, int64_t g0, int64_t g1, const uint8_t* xp, size_t xrb, int64_t ntok, int64_t n,
                 float* y, int64_t ldy) {
  thread_local std::vector<float> xt;
  xt.resize(static_cast<size_t>(ntok) * kBlockCols);
  const auto* x = reinterpret_cast<const float*>(xp);
  const int64_t xs = static_cast<int64_t>(xrb / sizeof(float));
  const int64_t tiles = (ntok + kTokenTile - 1) / kTokenTile;
  const int64_t nrows = (g1 - g0) * kPanelRows;
  for (int64_t k0 = 0; k0 < n; k0 += kBlockCols) {
    const int kc = static_cast<int>(std::min<int64_t>(kBlockCols, n - k0));
    pack_tiles([&](int64_t t) { return x + t * xs + k0; }, ntok, kc, xt.data());
    for (int64_t g = g0; g < g1; ++g) {
      const uint16_t* panel = w + g * n * kPanelRows + k0 * kPanelRows;
      const int64_t r = (g - g0) * kPanelRows;
      for (int64_t t = 0; t < ntok; t += kTokenTile) {
        const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t));
        prefetch_next_outputs(y, ldy, ntok, nrows, t, r);
        prefetch_next_panel(w, n, g, g0, g1, k0, t / kTokenTile, tiles);
        kTiles<uint16_t>[tb - 1](panel, kc, xt.data() + t * kc, y + t * ldy + r, ldy, k0 == 0, 0xFFFF, 0xFFFF);
      }
    }
  }
}

// PackedGemmFn: rows r0..r1 are whole groups; y points at row r0's outputs.
void gemm(const uint8_t* wp, int64_t /*rows*/, int64_t r0, int64_t r1, const uint8_t* xp, size_t xrb, int64_t ntok,
          int64_t n, float* y, int64_t ldy) {
  const auto* w = reinterpret_cast<const uint16_t*>(wp);
  const int64_t g0 = r0 / kPanelRows, g1 = r1 / kPanelRows;
  if (ntok > 1) return gemm_tokens(w, g0, g1, xp, xrb, ntok, n, y, ldy);
  const auto* x = reinterpret_cast<const float*>(xp);
  for (int64_t g = g0; g < g1; ++g) group_one_token(w + g * n * kPanelRows, n, x, y + (g - g0) * kPanelRows);
}

const PackedKernels kPanels{kPanelRows,
                            /*slab_cols=*/0,
                            half_groups::pack_bytes,
                            half_groups::pack<kPanelRows>,
                            avx512_f16_prep_bytes,
                            avx512_f16_prepare,
                            gemm,
                            /*one_token=*/true,
                            /*min_cols=*/0,
                            /*gemm_many=*/nullptr,
                            /*static_split=*/true};

}  // namespace

const PackedKernels* avx512_f16_packed() { return &kPanels; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
