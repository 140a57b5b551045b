// AArch64 NEON kernels (Apple silicon, Graviton, Ampere, Raspberry Pi 4+). NEON is mandatory on
// AArch64; int8 dots go through neon_int8.h's dot16 (SDOT where the build targets it).
#if defined(__aarch64__)
#include <arm_neon.h>

#include "platform/platform.h"
#include "tensor/f16.h"
#include "tensor/kernels/float_tiles.h"
#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_int8.h"
#include "tensor/kernels/neon_vec.h"
#include "tensor/quant_blocks.h"

namespace orchard::kernels {
namespace {

using neon::f16;

struct LoadF32 {
  static float32x4_t load(const uint8_t* p, int64_t i) { return vld1q_f32(reinterpret_cast<const float*>(p) + i); }
  static float one(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static float32x4_t load(const uint8_t* p, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float one(const uint8_t* p, int64_t i) { return f16(reinterpret_cast<const uint16_t*>(p)[i]); }
};

// bf16 is the top half of an f32: widen to 32 bits with a 16-bit shift.
struct LoadBF16 {
  static float32x4_t load(const uint8_t* p, int64_t i) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i), 16));
  }
  static float one(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};

template <int RB, int TB> using F32Tile = FloatTiles<NeonF32, LoadF32>::Tile<RB, TB>;
template <int RB, int TB> using F16Tile = FloatTiles<NeonF32, LoadF16>::Tile<RB, TB>;
template <int RB, int TB> using BF16Tile = FloatTiles<NeonF32, LoadBF16>::Tile<RB, TB>;

// FCVTN / FCVTL: nearest even (the default rounding mode) and quiet NaNs keeping their top
// payload bits, as tensor/f16.h; four at a time, the rest one by one.
void to_half_neon(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void to_float_neon(const uint16_t* h, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
  for (; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

constexpr HalfFns kHalf{to_half_neon, to_float_neon};

}  // namespace

const HalfFns* neon_half() { return &kHalf; }

Kernels lookup_neon(DType w) {
  switch (w) {
    case DType::F32: return {gemm_tiled<F32Tile>};
    case DType::F16: return {gemm_tiled<F16Tile>};
    case DType::BF16: return {gemm_tiled<BF16Tile>};
    default: {
      // The integer formats (neon_quant_tiles.h), with SDOT and SMMLA where this CPU has them.
      static const platform::ArmFeatures f = platform::arm_features();
      if (f.dotprod && f.i8mm) return {neon_quant_gemm_i8mm(w)};
      return {f.dotprod ? neon_quant_gemm_dotprod(w) : neon_quant_gemm(w)};
    }
  }
}

}  // namespace orchard::kernels
#endif  // __aarch64__
