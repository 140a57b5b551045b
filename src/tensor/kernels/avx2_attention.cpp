// Causal attention for KV heads on AVX2 (see tensor/attention.h): attend_tiles.h at 8 lanes.
// The scalar loop it replaces (model/blocks/gqa_attention.cpp) was ~15 % of a 1b F16 prompt at
// 2 threads.
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

namespace orchard::kernels {

AttendFn avx2_attend() { return attend_tiles::attend<Avx2F32>; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
