// The NEON repacked Q4_0/Q8_0/Q4_K/Q6_K rows for the build's own target (SDOT only if it targets dotprod).
#include "tensor/kernels/neon_packed_k.h"

#if defined(__aarch64__)
namespace orchard::kernels {
const PackedKernels* neon_packed(DType w) { return packed_layout(w); }
}  // namespace orchard::kernels
#endif
