// Q4_K and Q6_K repacked kernels for AVX-512 with VNNI: the AVX2 kernels' 256-bit
// products with each madd and add fused into one vpdpwssd (the plan and layouts: x86_packed_k.h),
// and prompt tiles on vpdpbusd (x86_packed_k_vnni.h).
#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

#include "tensor/kernels/avx512_target_begin.h"

namespace orchard::kernels {
namespace {

#include "tensor/kernels/avx2_lanes.h"
#include "tensor/kernels/packed_rows.h"
#include "tensor/kernels/x86_packed_k.h"

struct Dpwssd {
  static __m256i add(__m256i s, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(s, a, b); }
};

#include "tensor/kernels/x86_packed_k_vnni.h"

constexpr PackedKernels kQ4_KVnni = [] {
  PackedKernels k = kQ4_K<Dpwssd>;
  k.gemm_many = packed_gemm<Q4_KVnniMany, kQ4_KVnniTiles>;
  return k;
}();
constexpr PackedKernels kQ6_KVnni = [] {
  PackedKernels k = kQ6_K<Dpwssd>;
  k.gemm_many = packed_gemm<Q6_KVnniMany, kQ6_KVnniTiles>;
  return k;
}();

}  // namespace

const PackedKernels* avx512_packed_k(DType w) {
  if (w == DType::Q4_K) return &kQ4_KVnni;
  if (w == DType::Q6_K) return &kQ6_KVnni;
  return nullptr;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
