// Compiles what follows (up to avx512_target_end.h) for AVX-512 F/BW/VL/VNNI, whatever the
// build's -march; callers reach that code only after dispatch.cpp saw the CPU features.
// Deliberately without an include guard: each kernel file includes it once, first.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
// GCC 12's own AVX-512 headers trip these (their _mm512_undefined_* helpers); not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
