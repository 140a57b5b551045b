#pragma once
// Loop nest shared by the SIMD GEMM kernels: tokens in chunks that stay in L2, weight rows in
// tiles of RB, tokens in tiles of TB, and a micro-kernel Tile<RB, TB> computing an RB × TB block
// of dot products, so each weight block is unpacked once per TB tokens and each activation
// block loaded once per RB rows.
#include <cstddef>
#include <cstdint>

namespace orchard::kernels {
// Unnamed, so every kernel file keeps its own gemm_tiled: GCC gives gemm_tiled<T> external (weak)
// linkage when T is an alias template from an unnamed namespace, mangled alike in every file, so
// the AVX2 and AVX-512 files' gemm_tiled<Q4_0Tile> were one symbol and the linker kept whichever
// came first (one ISA's tiles ran for both; had the order flipped, AVX-512 code on AVX2 CPUs).
namespace {

// Tile<RB, TB>::run(w, wrb, x, xrb, nb, y, ldy) must exist for RB in {1, 4} and TB in {1, 4}.
template <template <int, int> class Tile>
inline void gemm_tiled(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* x, size_t xrb,
                       int64_t ntok, int64_t nb, float* y, int64_t ldy) {
  constexpr int64_t kTokenChunk = 64;
  for (int64_t t0 = 0; t0 < ntok; t0 += kTokenChunk) {
    const int64_t t1 = t0 + kTokenChunk < ntok ? t0 + kTokenChunk : ntok;
    int64_t r = 0;
    // One token (generation) streams one weight row at a time: measured 2× faster than
    // interleaving four row streams, which starves the hardware prefetcher.
    if (ntok > 1)
      for (; r + 4 <= nrows; r += 4) {
      int64_t t = t0;
      for (; t + 4 <= t1; t += 4) Tile<4, 4>::run(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
      for (; t < t1; ++t) Tile<4, 1>::run(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
    }
    for (; r < nrows; ++r) {
      int64_t t = t0;
      for (; t + 4 <= t1; t += 4) Tile<1, 4>::run(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
      for (; t < t1; ++t) Tile<1, 1>::run(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
    }
  }
}

}  // namespace
}  // namespace orchard::kernels
