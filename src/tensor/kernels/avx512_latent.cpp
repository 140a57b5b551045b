// Latent attention's kernels on AVX-512: the products over integer levels (level_tiles.h) and
// the passes over the latent cache (latent_tiles.h), at 16 lanes.
#if defined(__x86_64__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/latent_tiles.h"
#include "tensor/kernels/level_tiles.h"

namespace orchard::kernels {
namespace {

struct V512Latent {
  using Reg = __m512;
  static constexpr int kWidth = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg splat(float x) { return _mm512_set1_ps(x); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg fma(Reg a, Reg b, Reg acc) { return _mm512_fmadd_ps(a, b, acc); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
};

}  // namespace

// One row: 8 registers of outputs (FMA latency × throughput wants 8 chains in flight); several:
// 4 rows × 4 registers (16 chains) beside the 4 widened levels
LevelProductFn avx512_level_product() { return level_tiles::product<V512Latent, 8, 4, 4>; }

// 4 heads × 2 registers of a panel's 32 lanes, beside the row's 2
const LatentFns* avx512_latent() {
  static const LatentFns fns{latent_tiles::scores<V512Latent, 4>, latent_tiles::mix<V512Latent, 4>};
  return &fns;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
