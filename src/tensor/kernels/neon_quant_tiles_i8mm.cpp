// The NEON integer tiles compiled for SDOT and Armv8.6's int8 matrix multiply (SMMLA: Apple M2
// and later, Graviton 3, Cortex-A510/A710 and later), whatever the build's target: prompts of
// Q4_0, Q5_0 and Q8_0 in 4 × 4 tiles. dispatch calls them only where platform::arm_features()
// reports both instructions.
#if defined(__aarch64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif

#define ORCHARD_NEON_SDOT 1
#define ORCHARD_NEON_I8MM 1
#include "tensor/kernels/neon_quant_tiles.h"

namespace orchard::kernels {
GemmFn neon_quant_gemm_i8mm(DType w) { return quant_gemm(w); }
}  // namespace orchard::kernels

#include "tensor/kernels/neon_dotprod_target_end.h"
#endif  // __aarch64__
