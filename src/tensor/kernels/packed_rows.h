#pragma once
// The ISA-neutral half of the kernels over weights repacked at load with rows in SIMD lanes
// (avx512_packed.cpp: 16 rows, avx2_packed.cpp: 8, neon_packed_rows.h: 4): the layout's size, its
// slabs, the packing loop and the loop over row groups and token passes. Each ISA file supplies
// a format F with
//   kGroup, kElems        rows per group; elements per block (32, or 256 for the K-quants)
//   kBlock, kXBytes       packed bytes per group and block; prepared bytes per token and block
//   kSlab, kMaxTile       blocks per slab (see slab_offset); most tokens per tile call
//   pack_block(w, wrb, b, dst)   writes block b of the group whose first row is at w
// and a table of tiles, tiles[tb − 1] computing the group's rows × tb tokens. Include after the
// file's target header, inside its anonymous namespace, so every ISA compiles its own copy
// (<algorithm>, <cstddef> and <cstdint> included before).

// One prepared block of 32 elements of a token for the Q4_0/Q8_0 layouts: int8 q[32], float d,
// int32 c (the format's offset times Σq).
constexpr size_t kXBlock = 40;

template <class F>
size_t prep_bytes(int64_t n) {
  return static_cast<size_t>(n / F::kElems) * F::kXBytes;
}

template <class F>
size_t pack_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows / F::kGroup) * static_cast<size_t>(cols / F::kElems) * F::kBlock;
}

// Rows of more than F::kSlab blocks are packed in slabs: the first kSlab blocks of every group,
// group after group, then the next kSlab blocks of every group, and so on, so that a group's
// slab (and one token's activations for it) stays in L1 while the group streams. Where group
// g's blocks of the slab that starts at block s0 begin (every earlier slab is full).
template <class F>
size_t slab_offset(int64_t ngroups, int64_t nb, int64_t s0, int64_t g) {
  const int64_t len = std::min<int64_t>(F::kSlab, nb - s0);
  return static_cast<size_t>(s0 * ngroups + g * len) * F::kBlock;
}

template <class F>
void pack(const uint8_t* w, size_t wrb, int64_t rows, int64_t r0, int64_t r1, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / F::kElems, ngroups = rows / F::kGroup;
  for (int64_t g = r0 / F::kGroup; g < r1 / F::kGroup; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t s0 = b / F::kSlab * F::kSlab;
      F::pack_block(w + g * F::kGroup * wrb, wrb, b, out + slab_offset<F>(ngroups, nb, s0, g) + (b - s0) * F::kBlock);
    }
}

// A tile: the group's rows × tb tokens over nb blocks, continuing the sums in y unless `first`.
using GroupTileFn = void (*)(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy,
                             bool first);

// PackedGemmFn (kernels.h) over F's layout, tiles[tb − 1] for tb ≤ F::kMaxTile tokens.
template <class F, const GroupTileFn* tiles>
void packed_gemm(const uint8_t* w, int64_t rows, int64_t r0, int64_t r1, const uint8_t* x, size_t xrb, int64_t ntok,
                 int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / F::kElems, ngroups = rows / F::kGroup;
  constexpr int64_t kTokenChunk = 64;  // a chunk's prepared activations stay in L2
  for (int64_t t0 = 0; t0 < ntok; t0 += kTokenChunk) {
    const int64_t t1 = std::min(t0 + kTokenChunk, ntok);
    for (int64_t s0 = 0; s0 < nb; s0 += F::kSlab) {
      const int64_t len = std::min<int64_t>(F::kSlab, nb - s0);
      for (int64_t g = r0 / F::kGroup; g < r1 / F::kGroup; ++g) {
        const uint8_t* wg = w + slab_offset<F>(ngroups, nb, s0, g);
        float* yg = y + (g * F::kGroup - r0);
        // The passes share the tokens evenly (31 = 16 + 15, not 16 + 8 + 7): every pass streams
        // the group's weights again, and a pass of one token is bound by that stream alone.
        const int64_t passes = (t1 - t0 + F::kMaxTile - 1) / F::kMaxTile;
        for (int64_t p = 0, t = t0; p < passes; ++p) {
          const int64_t tb = (t1 - t + (passes - p) - 1) / (passes - p);
          tiles[tb - 1](wg, len, x + t * xrb + s0 * static_cast<int64_t>(F::kXBytes), xrb, yg + t * ldy, ldy, s0 == 0);
          t += tb;
        }
      }
    }
  }
}
