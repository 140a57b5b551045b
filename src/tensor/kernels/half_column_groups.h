#pragma once
// The F16 layout repacked at load that AVX-512 (32-row groups, avx512_f16_packed.cpp) and AVX2
// (16-row groups, avx2_f16_packed.cpp) share: rows in groups of R, a group stored column after
// column, each column the group's R halves:
//   packed[g][c][i] = W[R·g + i][c]
// so a column is whole registers of rows (an outer-product prompt tile, one token's stream of
// FMA chains), and every output is one FMA chain over the columns in order, whatever the token
// count. ISA-neutral: each kernel file instantiates it with its group size.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace orchard::kernels::half_groups {

inline size_t pack_bytes(int64_t rows, int64_t cols) { return static_cast<size_t>(rows * cols) * 2; }

// Rows r0..r1 (whole groups) of the row-major matrix into their groups' columns.
template <int R>
void pack(const uint8_t* w, size_t wrb, int64_t /*rows*/, int64_t r0, int64_t r1, int64_t cols, uint8_t* out) {
  constexpr int64_t kChunk = 64;  // columns at a time: R source rows of 128 B stay in L1
  for (int64_t g0 = r0; g0 < r1; g0 += R) {
    auto* dst = reinterpret_cast<uint16_t*>(out) + g0 * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
      const int64_t c1 = std::min(cols, c0 + kChunk);
      for (int i = 0; i < R; ++i) {
        const auto* src = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(g0 + i) * wrb);
        for (int64_t c = c0; c < c1; ++c) dst[c * R + i] = src[c];
      }
    }
  }
}

}  // namespace orchard::kernels::half_groups
