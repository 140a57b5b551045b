// The NEON integer tiles compiled for Armv8.2's int8 dot product (SDOT: every Apple M chip,
// Graviton 2 and later, Cortex-A55/A76 and later), whatever the build's target; dispatch.cpp
// calls them only where platform::arm_features() reports the instruction.
#if defined(__aarch64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define ORCHARD_NEON_SDOT 1
#include "tensor/kernels/neon_quant_tiles.h"

namespace orchard::kernels {
GemmFn neon_quant_gemm_dotprod(DType w) { return quant_gemm(w); }
}  // namespace orchard::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __aarch64__
