// The NEON repacked Q4_0/Q8_0/Q4_K/Q6_K rows compiled for SDOT, whatever the build's target (see
// neon_dotprod_target_begin.h).
#if defined(__aarch64__)
#include "tensor/kernels/neon_dotprod_target_begin.h"

#include "tensor/kernels/neon_packed_k.h"

namespace orchard::kernels {
const PackedKernels* neon_packed_dotprod(DType w) { return packed_layout(w); }
}  // namespace orchard::kernels

#include "tensor/kernels/neon_dotprod_target_end.h"
#endif  // __aarch64__
