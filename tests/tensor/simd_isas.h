#pragma once
// The SIMD ISAs this CPU runs, for tests that check every kernel and not only the one dispatch
// picks: AVX2 and AVX-512 on an AVX-512 CPU, AVX2 alone, NEON; none without SIMD.
#include <vector>

#include "tensor/kernels/kernels.h"

namespace orchard::test {

inline std::vector<kernels::Isa> simd_isas() {
  using kernels::Isa;
  const Isa best = kernels::detect_isa();
  if (best == Isa::Avx512) return {Isa::Avx2, Isa::Avx512};
  if (best == Isa::Scalar) return {};
  return {best};
}

}  // namespace orchard::test
