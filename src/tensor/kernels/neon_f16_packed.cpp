// F16 matrices repacked at load into 16-row groups for NEON: half_group_tiles.h at 4 lanes, one
// layout for every token count. A prompt's column step is the group's four registers of rows
// against up to six broadcast activations, 24 FMAs for 4 conversions, in 29 of NEON's 32
// registers; the row-major tiles (neon.cpp's gemm_tiled over F16) widen both operands at every
// step and end each output in a horizontal sum.
#if defined(__aarch64__)
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "tensor/f16.h"
#include "tensor/kernels/half_group_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_vec.h"

namespace orchard::kernels {
namespace {

// Activations as f32 values rounded through fp16: the values neon.cpp's F16 tiles multiply,
// after matmul converts them to vec_dot_type(F16).
size_t prep_bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
void prepare(const float* x, int64_t n, uint8_t* out) {
  auto* o = reinterpret_cast<float*>(out);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vcvt_f32_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; ++i) o[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

const PackedKernels kGroups = half_groups::packed_kernels<NeonF32>(prep_bytes, prepare);

}  // namespace

const PackedKernels* neon_f16_packed() { return &kGroups; }

}  // namespace orchard::kernels
#endif  // __aarch64__
