// F16 weights times many tokens (prompt processing) as a blocked outer-product GEMM.
//
// The dot-product tiles of avx512.cpp convert every weight vector from fp16 for each tile and
// end each output with a horizontal sum: fine for one token, where memory is the limit, but a
// prompt is compute-bound. Here a thread converts a panel of 32 rows × 256 columns to f32 once,
// transposed so that one column of the panel (32 rows) is two registers, and then streams every
// token past it: per column, 2 loads and 2·TB FMAs against TB broadcast activations.
//
// Rounding: each output is one FMA chain over the columns in order (partial sums parked in y
// between column blocks are floats, so the chain is exact to resume). It therefore does not
// depend on the tiling, the thread split or the token count — but it differs from the
// one-token kernel's, so matmul leaves it out where a server needs batch-invariant bits.
//
// Matrices repacked at load (avx512_f16_packed.cpp: the same chains, transposed once) skip the
// per-call transposition; this kernel serves the rest (--no-repack, rows not a multiple of 32).
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_panels.h"

namespace orchard::kernels {
namespace {

using namespace panels;

constexpr int kPanelCols = 256;  // 32 KB of f32 panel: stays in L1 while tokens stream past

// Requests into L2 a share of the weights of the panel after (k0, r0): slice j of `slices` of
// its rows (the next row panel at these columns, or the first one of the next column block).
// The rows' short runs of lines defeat the stream prefetchers; waiting for them was about a
// seventh of a 1b F16 prompt, and asking ahead gave 1.066× (1 thread) in one process.
[[gnu::always_inline]] inline void prefetch_next_panel(const uint8_t* w, size_t wrb, int64_t nrows, int64_t nb,
                                                       int64_t k0, int64_t r0, int64_t j, int64_t slices) {
  int64_t kn = k0, rn = r0 + kPanelRows;
  if (rn >= nrows) kn = k0 + kPanelCols, rn = 0;
  if (kn >= nb) return;
  const int64_t rows = std::min<int64_t>(kPanelRows, nrows - rn);
  const int64_t bytes = std::min<int64_t>(kPanelCols, nb - kn) * 2;
  for (int64_t r = rn + rows * j / slices; r < rn + rows * (j + 1) / slices; ++r) {
    const char* p = reinterpret_cast<const char*>(w + r * wrb + kn * 2);
    for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
  }
}

// GemmFn over activations from avx512_f16_prepare (f32 values rounded through fp16, `xrb` bytes
// apart); nb is the column count.
void f16_gemm_panels(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, size_t xrb, int64_t ntok,
                     int64_t nb, float* y, int64_t ldy) {
  alignas(64) float panel[kPanelCols * kPanelRows];
  thread_local std::vector<float> xt;
  xt.resize(static_cast<size_t>(ntok) * kPanelCols);
  const auto* x = reinterpret_cast<const float*>(xp);
  const int64_t xs = static_cast<int64_t>(xrb / sizeof(float));
  // Column blocks outermost: a block of every token's activations (ntok × 1 KB) stays in L2
  // while all of this thread's row panels pass.
  for (int64_t k0 = 0; k0 < nb; k0 += kPanelCols) {
    const int kc = static_cast<int>(std::min<int64_t>(kPanelCols, nb - k0));
    pack_tiles([&](int64_t t) { return x + t * xs + k0; }, ntok, kc, xt.data());
    for (int64_t r0 = 0; r0 < nrows; r0 += kPanelRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, nrows - r0));
      const uint8_t* w0 = w + r0 * wrb;
      pack_panel(
          [&](int r, int c0, __mmask16 m) {
            const auto* src = reinterpret_cast<const uint16_t*>(w0 + r * wrb) + k0 + c0;
            return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src));
          },
          rows, kc, panel);
      const __mmask16 m0 = low_mask(rows), m1 = high_mask(rows);
      const int64_t tiles = (ntok + kTokenTile - 1) / kTokenTile;
      for (int64_t t = 0; t < ntok; t += kTokenTile) {
        const int tb = static_cast<int>(std::min<int64_t>(kTokenTile, ntok - t));
        prefetch_next_outputs(y, ldy, ntok, nrows, t, r0);
        prefetch_next_panel(w, wrb, nrows, nb, k0, r0, t / kTokenTile, tiles);
        kTiles<float>[tb - 1](panel, kc, xt.data() + t * kc, y + t * ldy + r0, ldy, k0 == 0, m0, m1);
      }
    }
  }
}

}  // namespace

void add_avx512_many(DType w, Kernels& k) {
  if (w == DType::F16 && k.prepare) k.gemm_many = f16_gemm_panels;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
