// F16 matrices repacked at load into 16-row groups for AVX2: half_group_tiles.h at 8 lanes (the
// layout of avx512_f16_packed.cpp at half the width), one layout for every token count. A
// prompt's column step is the group's two registers of rows against up to six broadcast
// activations, 12 FMAs for 2 conversions, in 15 of AVX2's 16 registers. The row-major
// dot-product tiles it replaces converted both operands at every step and, at 4 × 4, needed 21
// registers (measured 0.52–0.55× llama.cpp's AVX2 build for 1b F16 prompts).
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/avx2_vec.h"
#include "tensor/kernels/half_group_tiles.h"

namespace orchard::kernels {
namespace {

const PackedKernels kGroups = half_groups::packed_kernels<Avx2F32>(avx2_f16_prep_bytes, avx2_f16_prepare);

}  // namespace

const PackedKernels* avx2_f16_packed() { return &kGroups; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
