// F16 matrices with long rows, repacked at load into column slabs for AVX-512.
//
// One token multiplies each weight row by the whole activation vector, kept in f32: 32 KB for an
// 8192-wide row (1b's down projection), which the weights streaming through L1 in between keep
// evicting. Measured on 1b F16 (one matrix kind at a time, all layers, 30 interleaved rounds):
// down read 47.5 GB/s against gate's 54.7 at 2 threads, 26.5 against 30.9 at 1 — and with its
// activations confined to 8 KB (wrong sums, same weights) down read as fast as gate. So rows
// wider than kSlabCols are stored as column slabs: slab s holds columns [s·S, s·S + S) of every
// row, row after row (a row-major matrix of S columns), then the next slab. A thread's rows of
// one slab are one stream; its activations for a slab are 8 KB.
//
// Rounding: a token's output is the sum of its slabs' dot products, added in slab order, each
// computed as the row-major one-token kernel computes a row (x86::f16_dot_row) — for every
// token count, so the bits never depend on the batch. Many tokens may instead take the panels
// kernel slab by slab (gemm_many), one FMA chain resumed across slabs, as for row-major weights.
#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_f16_dot.h"

namespace orchard::kernels {
namespace {

constexpr int64_t kSlabCols = 2048;
constexpr int64_t kRowGroup = 16;

// Where the slab starting at column s0 of a `rows`-row matrix begins; every earlier slab is full.
size_t slab_offset(int64_t rows, int64_t s0) { return static_cast<size_t>(rows * s0) * 2; }

size_t pack_bytes(int64_t rows, int64_t cols) { return static_cast<size_t>(rows * cols) * 2; }

void pack(const uint8_t* w, size_t wrb, int64_t rows, int64_t r0, int64_t r1, int64_t cols, uint8_t* out) {
  for (int64_t s0 = 0; s0 < cols; s0 += kSlabCols) {
    const int64_t len = std::min(kSlabCols, cols - s0);
    uint8_t* dst = out + slab_offset(rows, s0);
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(dst + static_cast<size_t>(r * len) * 2, w + static_cast<size_t>(r) * wrb + s0 * 2, static_cast<size_t>(len) * 2);
  }
}

// PackedGemmFn, batch-invariant (see the file comment). A row's slab (4 KB) stays in L1 while
// the tokens pass.
void gemm(const uint8_t* w, int64_t rows, int64_t r0, int64_t r1, const uint8_t* x, size_t xrb, int64_t ntok,
          int64_t n, float* y, int64_t ldy) {
  for (int64_t s0 = 0; s0 < n; s0 += kSlabCols) {
    const int64_t len = std::min(kSlabCols, n - s0);
    const uint8_t* ws = w + slab_offset(rows, s0);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = ws + static_cast<size_t>(r * len) * 2;
      for (int64_t t = 0; t < ntok; ++t) {
        const float s = x86::f16_dot_row(row, reinterpret_cast<const float*>(x + t * xrb) + s0, len);
        float& out = y[t * ldy + (r - r0)];
        out = s0 == 0 ? s : out + s;
      }
    }
  }
}

// PackedGemmFn for many tokens: the outer-product panels over each slab in turn.
void gemm_many(const uint8_t* w, int64_t rows, int64_t r0, int64_t r1, const uint8_t* x, size_t xrb, int64_t ntok,
               int64_t n, float* y, int64_t ldy) {
  for (int64_t s0 = 0; s0 < n; s0 += kSlabCols) {
    const int64_t len = std::min(kSlabCols, n - s0);
    const size_t wrb = static_cast<size_t>(len) * 2;
    avx512_f16_panels(w + slab_offset(rows, s0) + static_cast<size_t>(r0) * wrb, wrb, r1 - r0,
                      x + s0 * static_cast<int64_t>(sizeof(float)), xrb, ntok, len, y, ldy, s0 > 0);
  }
}

const PackedKernels kSlabs{kRowGroup, kSlabCols, pack_bytes, pack, avx512_f16_prep_bytes, avx512_f16_prepare,
                           gemm, /*one_token=*/true, /*min_cols=*/kSlabCols, gemm_many};

}  // namespace

const PackedKernels* avx512_f16_slabs() { return &kSlabs; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
