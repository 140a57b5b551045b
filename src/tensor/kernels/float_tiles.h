#pragma once
// The float micro-kernel shared by every ISA: an RB × TB tile of dot products over rows of
// float-like weights (F32, F16) and activations, V::kWidth elements per step. Each ISA file
// includes it after switching on its target and supplies
//   V:     Reg, kWidth, zero(), fma(a, b, acc) = a·b + acc, sum(reg)
//   Load:  load(bytes, i) → V::Reg holding elements i … i+kWidth−1, one(bytes, i) → float
#include <cstddef>
#include <cstdint>

namespace orchard::kernels {

template <class V, class WLoad, class XLoad = WLoad>
struct FloatTiles {
  template <int RB, int TB>
  struct Tile {
    static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t n, float* y,
                    int64_t ldy) {
      typename V::Reg acc[RB][TB];
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) acc[r][t] = V::zero();
      int64_t i = 0;
      for (; i + V::kWidth <= n; i += V::kWidth) {
        typename V::Reg xv[TB];
#pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) xv[t] = XLoad::load(x + t * xrb, i);
#pragma GCC unroll 8
        for (int r = 0; r < RB; ++r) {
          const typename V::Reg wv = WLoad::load(w + r * wrb, i);
#pragma GCC unroll 8
          for (int t = 0; t < TB; ++t) acc[r][t] = V::fma(wv, xv[t], acc[r][t]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          float s = V::sum(acc[r][t]);
          for (int64_t j = i; j < n; ++j) s += WLoad::one(w + r * wrb, j) * XLoad::one(x + t * xrb, j);
          y[t * ldy + r] = s;
        }
    }
  };
};

}  // namespace orchard::kernels
