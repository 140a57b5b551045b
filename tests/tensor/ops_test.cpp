// The element-wise ops against double-precision formulas, whichever kernel this CPU picks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/kernels/kernels.h"
#include "tensor/ops.h"
#include "tensor/simd_isas.h"

namespace orchard {
namespace {

// Every ISA this CPU runs (AVX2 and AVX-512 on an AVX-512 CPU; scalar where there is no SIMD).
std::vector<kernels::Isa> isas() {
  const std::vector<kernels::Isa> simd = test::simd_isas();
  return simd.empty() ? std::vector<kernels::Isa>{kernels::Isa::Scalar} : simd;
}

// SwiGLU through one ISA's kernel, or ops.cpp's (scalar) loop where it has none.
void swiglu_on(kernels::Isa isa, const float* g, const float* u, float* out, int64_t n) {
  if (const kernels::SwigluFn fn = kernels::lookup_swiglu(isa)) return fn(g, u, out, n);
  swiglu(g, u, out, n);
}

TEST(Ops, EverySimdIsaHasSwigluAndRopeKernels) {
  for (kernels::Isa isa : isas()) {
    if (isa == kernels::Isa::Scalar) continue;
    EXPECT_NE(kernels::lookup_swiglu(isa), nullptr) << kernels::isa_name(isa);
    EXPECT_NE(kernels::lookup_rope(isa), nullptr) << kernels::isa_name(isa);
  }
}

TEST(Ops, SwigluMatchesTheFormulaAcrossTailsAndExtremes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (kernels::Isa isa : isas())
  for (int64_t n : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 1000}) {
    SCOPED_TRACE(kernels::isa_name(isa));
    std::vector<float> g(n), u(n), out(n);
    for (int64_t i = 0; i < n; ++i) g[i] = nd(rng), u[i] = nd(rng);
    if (n >= 4) g[0] = -100.0f, g[1] = 100.0f, g[2] = 0.0f, g[3] = -30.0f;
    swiglu_on(isa, g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = static_cast<double>(g[i]) * u[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
      EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-30) << "n " << n << " g " << g[i] << " u " << u[i];
    }
  }
}

TEST(Ops, SwigluMayWriteOverItsGateInput) {
  for (kernels::Isa isa : isas()) {
    std::vector<float> g = {-2.0f, -0.5f, 0.5f, 2.0f, 1.0f, -1.0f, 3.0f, -3.0f, 0.25f},
                       u = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f};
    std::vector<float> separate(g.size());
    swiglu_on(isa, g.data(), u.data(), separate.data(), 9);
    swiglu_on(isa, g.data(), u.data(), g.data(), 9);
    EXPECT_EQ(g, separate) << kernels::isa_name(isa);
  }
}

TEST(Ops, RmsNormMatchesTheFormulaWithAndWithoutWeights) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {1, 7, 8, 9, 64, 257}) {
    std::vector<float> x(n), w(n), out(n), plain(n);
    for (int64_t i = 0; i < n; ++i) x[i] = nd(rng), w[i] = nd(rng);
    const float eps = 1e-5f;
    rms_norm(x.data(), w.data(), out.data(), n, eps);
    rms_norm(x.data(), nullptr, plain.data(), n, eps);
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(plain[i], x[i] * scale, 1e-6 * std::fabs(x[i] * scale) + 1e-7) << "n " << n << " i " << i;
      EXPECT_NEAR(out[i], x[i] * scale * w[i], 1e-6 * std::fabs(x[i] * scale * w[i]) + 1e-7) << "n " << n;
    }
  }
}

// Whichever kernel rotates, every value is the fused expression the scalar code writes
// (a' = fma(a, cos, −b·sin), b' = fma(a, sin, b·cos)), bit for bit, for both pairings and for
// sizes around the kernel's 8- and 16-pair registers; and a rotation keeps each pair's length.
// YaRN against its definition (Peng et al. 2023; the reference code's
// yarn_find_correction_range): for DeepSeek-V3's rope (64 dims, base 10000, 4096 original
// positions, beta 32 / 1) the correction range is dims 10..23; pairs below it keep the original
// angle, pairs above it are interpolated by freq_scale, those between blend linearly, and every
// pair's magnitude is mscale · (1 + 0.1·ln(1/freq_scale)).
TEST(Ops, RopeYarnBlendsOriginalAndInterpolatedAnglesByDimension) {
  const int64_t n_rot = 64, pos = 5000;
  const float base = 10000.0f, scale = 1.0f / 40.0f;
  const RopeYarn y = RopeYarn::make(n_rot, 4096, base, 0.8f);
  EXPECT_EQ(y.corr_low, 10.0f);
  EXPECT_EQ(y.corr_high, 23.0f);
  std::vector<float> cs(static_cast<size_t>(n_rot)), plain(cs.size()), original(cs.size());
  rope_angles(n_rot, pos, base, scale, nullptr, y, cs.data());
  rope_angles(n_rot, pos, base, scale, nullptr, plain.data());
  rope_angles(n_rot, pos, base, 1.0f, nullptr, original.data());
  const double mag = 0.8 * (1 + 0.1 * std::log(40.0));
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const size_t c = static_cast<size_t>(i), s = static_cast<size_t>(half + i);
    EXPECT_NEAR(std::hypot(cs[c], cs[s]), mag, 1e-5) << "pair " << i;
    const float* want = i <= 10 ? original.data() : i >= 23 ? plain.data() : nullptr;
    if (want) {
      // The same angle as plain RoPE at the original or the scaled frequency (to float rounding
      // of an angle of up to 5000 radians).
      EXPECT_NEAR(cs[c] / mag, want[c], 2e-3) << "pair " << i;
      EXPECT_NEAR(cs[s] / mag, want[s], 2e-3) << "pair " << i;
    } else {
      // Between: the angle lies between the interpolated and the original one.
      const double theta = pos * std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / n_rot);
      const double mix = 1.0 - (i - 10.0) / 13.0, angle = theta * scale * (1 - mix) + theta * mix;
      EXPECT_NEAR(cs[c] / mag, std::cos(angle), 2e-2) << "pair " << i;
      EXPECT_NEAR(cs[s] / mag, std::sin(angle), 2e-2) << "pair " << i;
    }
  }
  // ext_factor 0 is plain scaled RoPE, bit for bit.
  RopeYarn off;
  rope_angles(n_rot, pos, base, scale, nullptr, off, cs.data());
  EXPECT_EQ(cs, plain);
}

TEST(Ops, RopeRotateIsTheFusedFormulaBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (kernels::Isa isa : isas())
  for (bool neox : {false, true})
    for (int64_t n_rot : {2, 8, 14, 16, 30, 32, 48, 64, 96, 128}) {
      std::vector<float> head(static_cast<size_t>(n_rot + 6)), cs(static_cast<size_t>(n_rot));
      for (auto& v : head) v = nd(rng);
      std::vector<float> through_ops = head;
      rope_angles(n_rot, 37, 10000.0f, 1.0f, nullptr, cs.data());
      std::vector<float> want = head;
      const int64_t half = n_rot / 2;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
        const float a = head[static_cast<size_t>(ia)], b = head[static_cast<size_t>(ib)];
        const float c = cs[static_cast<size_t>(i)], s = cs[static_cast<size_t>(half + i)];
        want[static_cast<size_t>(ia)] = std::fma(a, c, -(b * s));
        want[static_cast<size_t>(ib)] = std::fma(a, s, b * c);
        EXPECT_NEAR(std::hypot(want[static_cast<size_t>(ia)], want[static_cast<size_t>(ib)]), std::hypot(a, b),
                    1e-5 * std::hypot(a, b));
      }
      // One ISA's kernel for the pairs it takes, the scalar loop for the rest (rope_rotate's way).
      const kernels::RopeFn fn = kernels::lookup_rope(isa);
      for (int64_t i = fn ? fn(head.data(), n_rot, cs.data(), neox) : 0; i < half; ++i) {
        float* a = neox ? &head[static_cast<size_t>(i)] : &head[static_cast<size_t>(2 * i)];
        float* b = neox ? &head[static_cast<size_t>(i + half)] : &head[static_cast<size_t>(2 * i + 1)];
        const float x0 = *a, x1 = *b, c = cs[static_cast<size_t>(i)], s = cs[static_cast<size_t>(half + i)];
        *a = std::fma(x0, c, -(x1 * s));
        *b = std::fma(x0, s, x1 * c);
      }
      for (size_t i = 0; i < head.size(); ++i)
        ASSERT_EQ(head[i], want[i]) << kernels::isa_name(isa) << (neox ? " neox" : " pairs") << " n_rot " << n_rot
                                    << " element " << i;
      rope_rotate(through_ops.data(), n_rot, cs.data(), neox);  // whichever kernel this CPU picks
      EXPECT_EQ(through_ops, want) << (neox ? "neox" : "pairs") << " n_rot " << n_rot;
    }
}

TEST(Ops, SoftmaxSumsToOneAndKeepsOrder) {
  std::vector<float> x = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  softmax(x.data(), static_cast<int64_t>(x.size()));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(x[1], x[3]);
  EXPECT_GT(x[0], x[4]);
  EXPECT_NEAR(x[1] / x[0], std::exp(2.0), 1e-4);
}

}  // namespace
}  // namespace orchard
