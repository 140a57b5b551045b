// The attention kernel against a double-precision reference, on shapes around its tiles (12
// query rows, 32 positions, 64 dims), and its claim that a row's bits do not depend on the
// rows that share the call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/attention.h"
#include "tensor/kernels/kernels.h"
#include "tensor/f16.h"
#include "tensor/simd_isas.h"
#if defined(__aarch64__)
#include "tensor/kernels/neon_exp.h"
#endif

namespace orchard {
namespace {

struct Case {
  int64_t ntok, group, head_dim, first_len, kv_heads;
};

constexpr KVType kTypes[] = {KVType::F32, KVType::F16};

struct Data {
  KVType type;
  std::vector<float> q, k, v;  // k and v as rows, for the reference (rounded to halves for F16)
  // k as the kernel reads it, panels per KV head; v too: floats or halves as `type` says
  std::vector<std::vector<float>> kp;
  std::vector<std::vector<uint16_t>> kph;
  std::vector<uint16_t> vh;
  std::vector<int64_t> len;
  int64_t qd, kvd, ctx;
  const void* panels(int64_t kvh) const {
    return type == KVType::F16 ? static_cast<const void*>(kph[static_cast<size_t>(kvh)].data())
                               : kp[static_cast<size_t>(kvh)].data();
  }
  const void* values(int64_t offset) const {
    return type == KVType::F16 ? static_cast<const void*>(vh.data() + offset) : v.data() + offset;
  }
};

Data make(const Case& c, uint32_t seed, KVType type = KVType::F32) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Data d;
  d.type = type;
  d.qd = c.kv_heads * c.group * c.head_dim;
  d.kvd = c.kv_heads * c.head_dim;
  d.ctx = c.first_len + c.ntok;
  d.q.resize(static_cast<size_t>(c.ntok * d.qd));
  d.k.resize(static_cast<size_t>(d.ctx * d.kvd));
  d.v.resize(d.k.size());
  for (auto* vec : {&d.q, &d.k, &d.v})
    for (auto& x : *vec) x = nd(rng);
  if (type == KVType::F16)
    for (auto* vec : {&d.k, &d.v})
      for (auto& x : *vec) x = fp16_to_fp32(fp32_to_fp16(x));
  std::vector<uint16_t> kh(d.k.size());
  to_halves(d.k.data(), kh.data(), static_cast<int64_t>(kh.size()));
  d.vh.resize(d.v.size());
  to_halves(d.v.data(), d.vh.data(), static_cast<int64_t>(d.vh.size()));
  for (int64_t h = 0; h < c.kv_heads; ++h) {
    d.kp.emplace_back(static_cast<size_t>(key_panels_size(d.ctx, c.head_dim)));
    d.kph.emplace_back(d.kp.back().size());
    for (int64_t p = 0; p < d.ctx; ++p) {
      store_key(d.kp.back().data(), c.head_dim, p, &d.k[p * d.kvd + h * c.head_dim]);
      store_key(d.kph.back().data(), c.head_dim, p, &kh[p * d.kvd + h * c.head_dim]);
    }
  }
  for (int64_t t = 0; t < c.ntok; ++t) d.len.push_back(c.first_len + t);  // causal: token t at position first_len-1+t
  return d;
}

// Every attention kernel this CPU runs (AVX2 and AVX-512 on an AVX-512 CPU), so each is checked
// whichever one attend() picks.
std::vector<kernels::Isa> attend_isas() {
  std::vector<kernels::Isa> out;
  for (kernels::Isa isa : test::simd_isas())
    if (kernels::lookup_attend(isa)) out.push_back(isa);
  return out;
}

AttendArgs args(const Case& c, Data& d, int64_t kvh, float* out) {
  AttendArgs a;
  a.q = d.q.data() + kvh * c.group * c.head_dim;
  a.out = out + kvh * c.group * c.head_dim;
  a.tok_stride = d.qd;
  a.ntok = c.ntok;
  a.group = c.group;
  a.len = d.len.data();
  a.kv_type = d.type;
  a.k = d.panels(kvh);
  a.v = d.values(kvh * c.head_dim);
  a.kv_stride = d.kvd;
  a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return a;
}

TEST(Attention, MatchesADoublePrecisionReference) {
  if (attend_isas().empty()) GTEST_SKIP() << "no attention kernel on this CPU";
  for (const kernels::Isa isa : attend_isas()) {
  const kernels::AttendFn attend = kernels::lookup_attend(isa);
  SCOPED_TRACE(kernels::isa_name(isa));
  const Case cases[] = {{1, 4, 64, 1, 2},  {5, 4, 64, 30, 2},  {13, 1, 64, 33, 1}, {3, 4, 128, 70, 2},
                        {7, 2, 80, 9, 3},  {1, 1, 16, 100, 1}, {40, 4, 64, 1, 1},  {2, 8, 48, 31, 1}};
  for (const Case& c : cases)
  for (const KVType type : kTypes) {
    Data d = make(c, static_cast<uint32_t>(c.ntok * 31 + c.head_dim), type);
    std::vector<float> out(d.q.size(), -7.0f);
    for (int64_t kvh = 0; kvh < c.kv_heads; ++kvh) attend(args(c, d, kvh, out.data()));
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    for (int64_t t = 0; t < c.ntok; ++t)
      for (int64_t h = 0; h < c.kv_heads * c.group; ++h) {
        const int64_t kvh = h / c.group, len = d.len[static_cast<size_t>(t)];
        std::vector<double> p(static_cast<size_t>(len));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          double s = 0;
          for (int64_t i = 0; i < c.head_dim; ++i)
            s += static_cast<double>(d.q[t * d.qd + h * c.head_dim + i]) * d.k[j * d.kvd + kvh * c.head_dim + i];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < c.head_dim; ++i) {
          double o = 0;
          for (int64_t j = 0; j < len; ++j) o += p[j] / sum * d.v[j * d.kvd + kvh * c.head_dim + i];
          ASSERT_NEAR(out[t * d.qd + h * c.head_dim + i], o, 1e-4)
              << kv_type_name(type) << " ntok " << c.ntok << " group " << c.group << " hd " << c.head_dim << " t "
              << t << " h " << h << " dim " << i;
        }
      }
  }
  }
}

TEST(Attention, ARowIsTheSameBitsAloneOrAmongOthers) {
  if (attend_isas().empty()) GTEST_SKIP() << "no attention kernel on this CPU";
  for (const kernels::Isa isa : attend_isas()) {
  const kernels::AttendFn attend = kernels::lookup_attend(isa);
  SCOPED_TRACE(kernels::isa_name(isa));
  const Case c{17, 4, 64, 20, 1};
  for (const KVType type : kTypes) {
  Data d = make(c, 5, type);
  std::vector<float> all(d.q.size()), alone(d.q.size());
  attend(args(c, d, 0, all.data()));
  for (int64_t t = 0; t < c.ntok; ++t) {  // each token in a call of its own
    Case one = c;
    one.ntok = 1;
    AttendArgs a = args(one, d, 0, alone.data());
    a.q += t * d.qd;
    a.out += t * d.qd;
    a.len = d.len.data() + t;
    attend(a);
  }
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], alone[i]) << kv_type_name(type) << " element " << i;
  }
  }
}

// A call over several KV heads (what a decoding step hands the kernel) gives every head the
// same bits as a call of its own, for one token and for several, across groups and head sizes
// around the kernel's tiles.
TEST(Attention, SeveralHeadsInOneCallAreTheSameBitsAsOneHeadEach) {
  if (attend_isas().empty()) GTEST_SKIP() << "no attention kernel on this CPU";
  for (const kernels::Isa isa : attend_isas()) {
  const kernels::AttendFn attend = kernels::lookup_attend(isa);
  SCOPED_TRACE(kernels::isa_name(isa));
  const Case cases[] = {{1, 2, 32, 70, 4},  {1, 1, 64, 1, 3},   {1, 4, 128, 97, 2}, {1, 4, 80, 33, 5},
                        {1, 8, 64, 40, 2},  {1, 2, 32, 128, 6}, {3, 2, 32, 45, 4},  {1, 3, 48, 20, 3}};
  for (const Case& c : cases)
  for (const KVType type : kTypes) {
    Data d = make(c, static_cast<uint32_t>(c.group * 131 + c.first_len), type);
    std::vector<float> each(d.q.size(), -7.0f), joint(d.q.size(), -9.0f);
    for (int64_t kvh = 0; kvh < c.kv_heads; ++kvh) attend(args(c, d, kvh, each.data()));
    // The heads' panels one after another at a fixed stride, as the KV cache keeps them.
    const int64_t stride = key_panels_size(d.ctx, c.head_dim);
    std::vector<float> panels(static_cast<size_t>(stride * c.kv_heads));
    std::vector<uint16_t> halves(panels.size());
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      std::copy(d.kp[h].begin(), d.kp[h].end(), panels.begin() + h * stride);
      std::copy(d.kph[h].begin(), d.kph[h].end(), halves.begin() + h * stride);
    }
    AttendArgs a = args(c, d, 0, joint.data());
    a.k = type == KVType::F16 ? static_cast<const void*>(halves.data()) : panels.data();
    a.n_kv = c.kv_heads;
    a.k_head_stride = stride;
    attend(a);
    for (size_t i = 0; i < each.size(); ++i)
      ASSERT_EQ(joint[i], each[i]) << kv_type_name(type) << " ntok " << c.ntok << " group " << c.group << " hd " << c.head_dim << " element " << i;
  }
  }
}

TEST(Attention, KeyPanelsHoldEachPositionOnce) {
  const int64_t hd = 48, n = 70;
  std::vector<uint16_t> panels(static_cast<size_t>(key_panels_size(n, hd)), 0x7E00);  // NaN
  std::vector<uint16_t> key(static_cast<size_t>(hd));
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t d = 0; d < hd; ++d) key[static_cast<size_t>(d)] = static_cast<uint16_t>(p * hd + d + 1);
    store_key(panels.data(), hd, p, key.data());
  }
  for (int64_t p = 0; p < n; ++p)
    for (int64_t d = 0; d < hd; ++d)
      ASSERT_EQ(panels[static_cast<size_t>(key_offset(p, d, hd))], p * hd + d + 1) << p << "," << d;
  // Lanes past the last position are zeros (a started panel is cleared), never left over.
  for (int64_t p = n; p < key_panels_size(n, hd) / hd; ++p)
    for (int64_t d = 0; d < hd; ++d) ASSERT_EQ(panels[static_cast<size_t>(key_offset(p, d, hd))], 0);
}

// The cache's row conversions (vectorized where the CPU can) give tensor/f16.h's bits: every
// half to a float, and floats around every rounding edge (ties, the largest half, the
// subnormals, infinities, NaNs) plus a sweep of the whole float range, at lengths that leave
// tails.
TEST(Attention, HalfRowConversionsAreTheScalarOnesBitForBit) {
  std::vector<uint16_t> every(65536);
  for (uint32_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(every.size());
  to_floats(every.data(), wide.data(), static_cast<int64_t>(every.size()));
  for (uint32_t i = 0; i < every.size(); ++i) {
    const float want = fp16_to_fp32(every[i]);
    ASSERT_EQ(std::memcmp(&wide[i], &want, sizeof want), 0) << "half 0x" << std::hex << i;
  }
  std::vector<float> xs = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 6.1035156e-05f, 6.0975552e-05f,
                           5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-45f, INFINITY, -INFINITY, NAN, -NAN};
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 65521) {
    float f;
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, sizeof f);
    xs.push_back(f);
    const uint32_t tie = (b & ~0x1FFFu) | 0x1000u;  // exactly between two halves' mantissas
    std::memcpy(&f, &tie, sizeof f);
    xs.push_back(f);
  }
  std::vector<uint16_t> got(xs.size());
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, static_cast<int64_t>(xs.size())}) {
    std::fill(got.begin(), got.end(), uint16_t{0xABCD});
    to_halves(xs.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], fp32_to_fp16(xs[i])) << "float " << xs[i] << " at " << i;
    for (size_t i = static_cast<size_t>(n); i < got.size(); ++i) ASSERT_EQ(got[i], 0xABCD) << "wrote past " << n;
  }
}

// No ISA goes without: the scalar loop is for CPUs with no SIMD at all (and narrow heads).
TEST(Attention, EverySimdIsaHasAKernel) {
  const kernels::Isa best = kernels::detect_isa();
  if (best == kernels::Isa::Scalar) GTEST_SKIP() << "no SIMD on this CPU";
  EXPECT_NE(kernels::lookup_attend(best), nullptr) << kernels::isa_name(best);
  if (best == kernels::Isa::Avx512) {
    EXPECT_NE(kernels::lookup_attend(kernels::Isa::Avx2), nullptr);
  }
  EXPECT_TRUE(attend_available(64));
}

TEST(Attention, NarrowHeadsHaveNoKernel) {
  EXPECT_FALSE(attend_available(8));
  EXPECT_FALSE(attend_available(0));
}

// A softmax's vector e^x (`width` lanes a call): within 2 ulp of libm over the range a softmax
// sees (and beyond), 0 below the underflow edge, e^88.7 above the top, NaN through.
void expect_vector_exp(void (*exp_n)(const float*, float*), int width) {
  std::vector<float> xs;
  for (float x = -87.0f; x <= 88.7f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f, -0.5f, 1.0f, 88.7f, -87.3f}) xs.push_back(x);
  xs.insert(xs.end(), {-90.0f, -1000.0f, NAN, -INFINITY, INFINITY, 1000.0f});
  const size_t edges = xs.size() - 6;
  while (xs.size() % static_cast<size_t>(width)) xs.push_back(0.0f);
  std::vector<float> out(xs.size());
  for (size_t i = 0; i < xs.size(); i += static_cast<size_t>(width)) exp_n(xs.data() + i, out.data() + i);
  for (size_t i = 0; i < edges; ++i) {
    const float want = std::exp(xs[i]);
    EXPECT_LE(std::fabs(out[i] - want), 2 * (std::nextafter(want, INFINITY) - want)) << "x = " << xs[i];
  }
  EXPECT_EQ(out[edges], 0.0f);
  EXPECT_EQ(out[edges + 1], 0.0f);
  EXPECT_TRUE(std::isnan(out[edges + 2]));
  EXPECT_EQ(out[edges + 3], 0.0f);
  EXPECT_TRUE(std::isfinite(out[edges + 4]) && out[edges + 4] > 3e38f) << out[edges + 4];
  EXPECT_TRUE(std::isfinite(out[edges + 5]) && out[edges + 5] > 3e38f) << out[edges + 5];
}

#if defined(__x86_64__)
}  // namespace
}  // namespace orchard
#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/avx2_exp.h"
namespace orchard {
namespace {
void exp8(const float* in, float* out) { _mm256_storeu_ps(out, kernels::exp256(_mm256_loadu_ps(in))); }
}  // namespace
}  // namespace orchard
#include "tensor/kernels/avx2_target_end.h"
namespace orchard {
namespace {

// AVX2's e^x: 8 lanes, 2^n built in two halves (n reaches 128).
TEST(Attention, Avx2VectorExpIsWithinTwoUlpOfLibm) {
  if (kernels::detect_isa() != kernels::Isa::Avx2 && kernels::detect_isa() != kernels::Isa::Avx512)
    GTEST_SKIP() << "no AVX2 on this CPU";
  expect_vector_exp(exp8, 8);
}
#endif

#if defined(__AVX512F__)
}  // namespace
}  // namespace orchard
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_exp.h"
namespace orchard {
namespace {
void exp16(const float* in, float* out) { _mm512_storeu_ps(out, kernels::exp512(_mm512_loadu_ps(in))); }
}  // namespace
}  // namespace orchard
#include "tensor/kernels/avx512_target_end.h"
namespace orchard {
namespace {

// AVX-512's e^x: 16 lanes, 2^n by scalef.
TEST(Attention, VectorExpIsWithinTwoUlpOfLibm) { expect_vector_exp(exp16, 16); }
#endif

#if defined(__aarch64__)
void exp4(const float* in, float* out) { vst1q_f32(out, kernels::exp128(vld1q_f32(in))); }

// NEON's e^x: 4 lanes, 2^n built in two halves.
TEST(Attention, NeonVectorExpIsWithinTwoUlpOfLibm) { expect_vector_exp(exp4, 4); }
#endif

}  // namespace
}  // namespace orchard
