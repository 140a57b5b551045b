// SwiGLU and RoPE's rotation on AVX2: elementwise_tiles.h at 8 lanes.
#if defined(__x86_64__)
#include <algorithm>
#include <cstdint>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/avx2_vec.h"
#include "tensor/kernels/elementwise_tiles.h"

namespace orchard::kernels {

SwigluFn avx2_swiglu() { return elementwise::swiglu<Avx2F32>; }
RopeFn avx2_rope() { return elementwise::rope_rotate<Avx2F32>; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
