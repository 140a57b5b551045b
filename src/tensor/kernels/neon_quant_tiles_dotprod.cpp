// The NEON integer tiles compiled for SDOT, whatever the build's target (see
// neon_dotprod_target_begin.h).
#if defined(__aarch64__)
#include "tensor/kernels/neon_dotprod_target_begin.h"

#include "tensor/kernels/neon_quant_tiles.h"

namespace orchard::kernels {
GemmFn neon_quant_gemm_dotprod(DType w) { return quant_gemm(w); }
}  // namespace orchard::kernels

#include "tensor/kernels/neon_dotprod_target_end.h"
#endif  // __aarch64__
