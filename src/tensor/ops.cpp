#include "tensor/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <cstring>
#include <vector>

#include "tensor/kernels/kernels.h"

namespace orchard {

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  // Sum in double as ggml does, so long rows keep their precision; eight running sums, so the
  // adds do not wait on each other (one chain made this a visible share of a small model's step).
  double part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  double sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  // Eight at a time by hand: out may be x, so the compiler would not vectorize this loop.
  typedef float v8 __attribute__((vector_size(32)));
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    v8 xv, wv;
    std::memcpy(&xv, x + k, sizeof xv);
    xv *= scale;
    if (w) {
      std::memcpy(&wv, w + k, sizeof wv);
      xv *= wv;
    }
    std::memcpy(out + k, &xv, sizeof xv);
  }
  for (; k < n; ++k) out[k] = w ? x[k] * scale * w[k] : x[k] * scale;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  // GCC/Clang vector extension: 8 floats per step lowers to AVX, SSE or NEON as targeted.
  typedef float v8 __attribute__((vector_size(32)));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8 xv, yv;
    std::memcpy(&xv, x + i, sizeof xv);
    std::memcpy(&yv, y + i, sizeof yv);
    yv += a * xv;
    std::memcpy(y + i, &yv, sizeof yv);
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  static const kernels::SwigluFn simd = kernels::lookup_swiglu(kernels::detect_isa());
  if (simd) return simd(gate, up, out, n);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void rope_angles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors, float* cs) {
  // θ advances geometrically pair by pair, in float like ggml, so angles match its rounding.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float ff = freq_factors ? freq_factors[i] : 1.0f;
    const float angle = freq_scale * (theta / ff);
    cs[i] = std::cos(angle);
    cs[half + i] = std::sin(angle);
    theta *= theta_scale;
  }
}

RopeYarn RopeYarn::make(int64_t n_rot, int64_t n_ctx_orig, float base, float mscale, float beta_fast, float beta_slow) {
  // The dim whose wavelength spans the original context `rotations` times.
  const auto dim_for = [&](float rotations) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(base));
  };
  RopeYarn y;
  y.ext_factor = 1.0f;
  y.corr_low = std::max(0.0f, std::floor(dim_for(beta_fast)));
  y.corr_high = std::min(static_cast<float>(n_rot - 1), std::ceil(dim_for(beta_slow)));
  y.mscale = mscale;
  return y;
}

void rope_angles(int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors,
                 const RopeYarn& yarn, float* cs) {
  if (yarn.ext_factor == 0.0f) {
    rope_angles(n_rot, pos, base, freq_scale, freq_factors, cs);
    return;
  }
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  const float mscale = yarn.mscale * (1.0f + 0.1f * std::log(1.0f / freq_scale));
  float theta = static_cast<float>(pos);
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float extrap = theta / (freq_factors ? freq_factors[i] : 1.0f), interp = freq_scale * extrap;
    // ramp: 1 at and below corr_low (keep θ), 0 at and above corr_high (interpolate)
    const float y = (static_cast<float>(i) - yarn.corr_low) / std::max(0.001f, yarn.corr_high - yarn.corr_low);
    const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * yarn.ext_factor;
    const float angle = interp * (1.0f - mix) + extrap * mix;
    cs[i] = std::cos(angle) * mscale;
    cs[half + i] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

void rope_rotate(float* head, int64_t n_rot, const float* cs, bool neox) {
  static const kernels::RopeFn simd = kernels::lookup_rope(kernels::detect_isa());
  const int64_t half = n_rot / 2;
  for (int64_t i = simd ? simd(head, n_rot, cs, neox) : 0; i < half; ++i) {
    const float c = cs[i], s = cs[half + i];
    float* a = neox ? &head[i] : &head[2 * i];
    float* b = neox ? &head[i + half] : &head[2 * i + 1];
    const float x0 = *a, x1 = *b;
    // Fused as written, so every build and kernel rounds alike.
    *a = std::fma(x0, c, -(x1 * s));
    *b = std::fma(x0, s, x1 * c);
  }
}

void rope(float* head, int64_t n_rot, int64_t pos, float base, float freq_scale,
          const float* freq_factors, bool neox) {
  std::vector<float> cs(static_cast<size_t>(n_rot));
  rope_angles(n_rot, pos, base, freq_scale, freq_factors, cs.data());
  rope_rotate(head, n_rot, cs.data(), neox);
}

}  // namespace orchard
