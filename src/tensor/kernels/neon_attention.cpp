// Causal attention for KV heads on NEON (see tensor/attention.h): attend_tiles.h at 4 lanes,
// 6 rows × 4 registers of accumulators (of NEON's 32).
#if defined(__aarch64__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/kernels/attend_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_vec.h"

namespace orchard::kernels {

AttendFn neon_attend() { return attend_tiles::attend<NeonF32>; }

}  // namespace orchard::kernels
#endif  // __aarch64__
