// Causal attention for KV heads on NEON (see tensor/attention.h): attend_tiles.h at 4 lanes,
// 6 rows × 4 registers of accumulators (of NEON's 32). Also latent attention's kernels
// (level_tiles.h, latent_tiles.h).
#if defined(__aarch64__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/kernels/attend_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/latent_tiles.h"
#include "tensor/kernels/level_tiles.h"
#include "tensor/kernels/neon_vec.h"

namespace orchard::kernels {

AttendFn neon_attend() { return attend_tiles::attend<NeonF32>; }
// One row: 8 registers of outputs; several: 3 rows × 4 (of NEON's 32, beside the widened levels
// and, for column groups, as many partial sums)
LevelProductFn neon_level_product() { return level_tiles::product<NeonF32, 8, 3, 4>; }
// 2 heads × 8 registers of a panel's 32 lanes, beside the row's 8 (of 32)
const LatentFns* neon_latent() {
  static const LatentFns fns{latent_tiles::scores<NeonF32, 2>, latent_tiles::mix<NeonF32, 2>};
  return &fns;
}

}  // namespace orchard::kernels
#endif  // __aarch64__
