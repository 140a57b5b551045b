// Causal attention for KV heads on AVX2 (see tensor/attention.h): attend_tiles.h at 8 lanes.
// The scalar loop it replaces (model/blocks/gqa_attention.cpp) was ~15 % of a 1b F16 prompt at
// 2 threads. Also latent attention's kernels (level_tiles.h, latent_tiles.h).
#if defined(__x86_64__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/attend_tiles.h"
#include "tensor/kernels/avx2_vec.h"
#include "tensor/kernels/latent_tiles.h"
#include "tensor/kernels/level_tiles.h"

namespace orchard::kernels {

AttendFn avx2_attend() { return attend_tiles::attend<Avx2F32>; }
// One row: 4 registers of outputs; several: 2 rows × 4 (of AVX2's 16, beside the 4 widened
// levels and, for column groups, as many partial sums)
LevelProductFn avx2_level_product() { return level_tiles::product<Avx2F32, 4, 2, 2>; }
// 2 heads × 4 registers of a panel's 32 lanes, beside the row's 4 (of 16)
const LatentFns* avx2_latent() {
  static const LatentFns fns{latent_tiles::scores<Avx2F32, 2>, latent_tiles::mix<Avx2F32, 2>};
  return &fns;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
