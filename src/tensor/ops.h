#pragma once
// Element-wise and row-wise operations of the transformer, in float32.
#include <cstdint>

namespace orchard {

// out = x / sqrt(mean(x²) + eps) * w   (w may be nullptr for no weight); out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// y += a · x over n values (vectorised by the compiler for whatever SIMD the build targets).
void axpy(float a, const float* x, float* y, int64_t n);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g); out may alias gate.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// Rotary position embedding of one head (n_rot of its dims rotated) at position `pos`:
// pair (a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ), θ_i = pos·scale·base^(-2i/n_rot) / f_i.
// neox: pairs are (i, i + n_rot/2); otherwise (2i, 2i+1).
void rope(float* head, int64_t n_rot, int64_t pos, float base, float freq_scale,
          const float* freq_factors, bool neox);
// The same in two steps, so a forward pass computes each position's angles once for every head
// and layer: cs[0, n_rot/2) = cos θ_i, cs[n_rot/2, n_rot) = sin θ_i, then the rotation.
void rope_angles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors, float* cs);

// YaRN (rope.scaling.type = yarn), as ggml computes it: pair i's angle blends the interpolated
// θ·freq_scale (low frequencies, i ≥ corr_high) and the original θ (high frequencies,
// i ≤ corr_low) by a linear ramp between, and cos and sin are scaled by
// mscale · (1 + 0.1·ln(1/freq_scale)).
struct RopeYarn {
  float ext_factor = 0.0f;  // weight of the blend (0: plain scaled RoPE)
  float corr_low = 0.0f, corr_high = 0.0f;
  float mscale = 1.0f;
  // The correction range for `n_rot` rotated dims, a model trained on `n_ctx_orig` positions
  // and the usual beta_fast 32 / beta_slow 1.
  static RopeYarn make(int64_t n_rot, int64_t n_ctx_orig, float base, float mscale, float beta_fast = 32.0f,
                       float beta_slow = 1.0f);
};
void rope_angles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors,
                 const RopeYarn& yarn, float* cs);
void rope_rotate(float* head, int64_t n_rot, const float* cs, bool neox);

}  // namespace orchard
