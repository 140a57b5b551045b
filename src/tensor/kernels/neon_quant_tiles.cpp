// The NEON integer tiles for the build's own target (SDOT only if it targets dotprod).
#include "tensor/kernels/neon_quant_tiles.h"

#if defined(__aarch64__)
namespace orchard::kernels {
GemmFn neon_quant_gemm(DType w) { return quant_gemm(w); }
}  // namespace orchard::kernels
#endif
