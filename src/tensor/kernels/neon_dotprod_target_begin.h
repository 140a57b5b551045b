// Compiles what follows (up to neon_dotprod_target_end.h) for Armv8.2's int8 dot product (SDOT:
// every Apple M chip, Graviton 2 and later, Cortex-A55/A76 and later), whatever the build's
// target; dispatch.cpp calls that code only where platform::arm_features() reports the
// instruction. Defines ORCHARD_NEON_SDOT, since clang's target attribute sets no feature macro.
// Deliberately without an include guard: each such file includes it once, first.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
#define ORCHARD_NEON_SDOT 1
