// SwiGLU and RoPE's rotation on NEON: elementwise_tiles.h at 4 lanes.
#if defined(__aarch64__)
#include <algorithm>
#include <cstdint>

#include "tensor/kernels/elementwise_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_vec.h"

namespace orchard::kernels {

SwigluFn neon_swiglu() { return elementwise::swiglu<NeonF32>; }
RopeFn neon_rope() { return elementwise::rope_rotate<NeonF32>; }

}  // namespace orchard::kernels
#endif  // __aarch64__
