// Q4_K and Q6_K repacked kernels for AVX2 (the plan and layouts: x86_packed_k.h).
#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

#include "tensor/kernels/avx2_target_begin.h"

namespace orchard::kernels {
namespace {

#include "tensor/kernels/avx2_lanes.h"
#include "tensor/kernels/packed_rows.h"
#include "tensor/kernels/x86_packed_k.h"

struct MaddAdd {
  static __m256i add(__m256i s, __m256i a, __m256i b) { return _mm256_add_epi32(s, _mm256_madd_epi16(a, b)); }
};

}  // namespace

const PackedKernels* avx2_packed_k(DType w) {
  if (w == DType::Q4_K) return &kQ4_K<MaddAdd>;
  if (w == DType::Q6_K) return &kQ6_K<MaddAdd>;
  return nullptr;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
