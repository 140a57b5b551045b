#pragma once
// The row × token loops shared by the kernels that take two weight blocks per 512-bit operation
// (avx512_q4_0.cpp, avx512_q8_0.cpp). `Tile::run<RB, TB>(w, wrb, x, xrb, nb, y, ldy)` computes
// RB rows × TB tokens over nb blocks. Include inside the kernel file's anonymous namespace.

// One token: one row at a time, so the weights stream as one sequence.
template <class Tile>
void pair_gemv(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  for (int64_t r = 0; r < nrows; ++r) Tile::template run<1, 1>(w + r * wrb, wrb, xp, 0, n / 32, y + r, 0);
}

template <class Tile>
void pair_gemm_prepared(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* x, size_t xrb, int64_t ntok,
                        int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / 32;
  constexpr int64_t kTokenChunk = 64;  // keeps a chunk of prepared activations in L2
  for (int64_t t0 = 0; t0 < ntok; t0 += kTokenChunk) {
    const int64_t t1 = t0 + kTokenChunk < ntok ? t0 + kTokenChunk : ntok;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
      int64_t t = t0;
      for (; t + 3 <= t1; t += 3) Tile::template run<4, 3>(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
      for (; t < t1; ++t) Tile::template run<4, 1>(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
    }
    for (; r < nrows; ++r)
      for (int64_t t = t0; t < t1; ++t)
        Tile::template run<1, 1>(w + r * wrb, wrb, x + t * xrb, xrb, nb, y + t * ldy + r, ldy);
  }
}
