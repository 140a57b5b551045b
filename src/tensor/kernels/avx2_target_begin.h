// Compiles what follows (up to avx2_target_end.h) for AVX2 + FMA + F16C (Haswell, Zen 1 and
// later), whatever the build's -march; callers reach that code only after dispatch.cpp saw the
// CPU features. Deliberately without an include guard: each kernel file includes it once, first.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>
