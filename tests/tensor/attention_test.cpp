// The attention kernel against a double-precision reference, on shapes around its tiles (12
// query rows, 32 positions, 64 dims), and its claim that a row's bits do not depend on the
// rows that share the call.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/attention.h"

namespace orchard {
namespace {

struct Case {
  int64_t ntok, group, head_dim, first_len, kv_heads;
};

struct Data {
  std::vector<float> q, k, v;          // k: rows, for the reference
  std::vector<std::vector<float>> kp;  // k as the kernel reads it: panels per KV head
  std::vector<int64_t> len;
  int64_t qd, kvd, ctx;
};

Data make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Data d;
  d.qd = c.kv_heads * c.group * c.head_dim;
  d.kvd = c.kv_heads * c.head_dim;
  d.ctx = c.first_len + c.ntok;
  d.q.resize(static_cast<size_t>(c.ntok * d.qd));
  d.k.resize(static_cast<size_t>(d.ctx * d.kvd));
  d.v.resize(d.k.size());
  for (auto* vec : {&d.q, &d.k, &d.v})
    for (auto& x : *vec) x = nd(rng);
  for (int64_t h = 0; h < c.kv_heads; ++h) {
    d.kp.emplace_back(static_cast<size_t>(key_panels_size(d.ctx, c.head_dim)));
    for (int64_t p = 0; p < d.ctx; ++p) store_key(d.kp.back().data(), c.head_dim, p, &d.k[p * d.kvd + h * c.head_dim]);
  }
  for (int64_t t = 0; t < c.ntok; ++t) d.len.push_back(c.first_len + t);  // causal: token t at position first_len-1+t
  return d;
}

AttendArgs args(const Case& c, Data& d, int64_t kvh, float* out) {
  AttendArgs a;
  a.q = d.q.data() + kvh * c.group * c.head_dim;
  a.out = out + kvh * c.group * c.head_dim;
  a.tok_stride = d.qd;
  a.ntok = c.ntok;
  a.group = c.group;
  a.len = d.len.data();
  a.k = d.kp[static_cast<size_t>(kvh)].data();
  a.v = d.v.data() + kvh * c.head_dim;
  a.kv_stride = d.kvd;
  a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return a;
}

TEST(Attention, MatchesADoublePrecisionReference) {
  if (!attend_available(64)) GTEST_SKIP() << "no attention kernel on this CPU";
  const Case cases[] = {{1, 4, 64, 1, 2},  {5, 4, 64, 30, 2},  {13, 1, 64, 33, 1}, {3, 4, 128, 70, 2},
                        {7, 2, 80, 9, 3},  {1, 1, 16, 100, 1}, {40, 4, 64, 1, 1},  {2, 8, 48, 31, 1}};
  for (const Case& c : cases) {
    Data d = make(c, static_cast<uint32_t>(c.ntok * 31 + c.head_dim));
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
              << "ntok " << c.ntok << " group " << c.group << " hd " << c.head_dim << " t " << t << " h " << h
              << " dim " << i;
        }
      }
  }
}

TEST(Attention, ARowIsTheSameBitsAloneOrAmongOthers) {
  if (!attend_available(64)) GTEST_SKIP() << "no attention kernel on this CPU";
  const Case c{17, 4, 64, 20, 1};
  Data d = make(c, 5);
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
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], alone[i]) << "element " << i;
}

// A call over several KV heads (what a decoding step hands the kernel) gives every head the
// same bits as a call of its own, for one token and for several, across groups and head sizes
// around the kernel's tiles.
TEST(Attention, SeveralHeadsInOneCallAreTheSameBitsAsOneHeadEach) {
  if (!attend_available(64)) GTEST_SKIP() << "no attention kernel on this CPU";
  const Case cases[] = {{1, 2, 32, 70, 4},  {1, 1, 64, 1, 3},   {1, 4, 128, 97, 2}, {1, 4, 80, 33, 5},
                        {1, 8, 64, 40, 2},  {1, 2, 32, 128, 6}, {3, 2, 32, 45, 4},  {1, 3, 48, 20, 3}};
  for (const Case& c : cases) {
    Data d = make(c, static_cast<uint32_t>(c.group * 131 + c.first_len));
    std::vector<float> each(d.q.size(), -7.0f), joint(d.q.size(), -9.0f);
    for (int64_t kvh = 0; kvh < c.kv_heads; ++kvh) attend(args(c, d, kvh, each.data()));
    // The heads' panels one after another at a fixed stride, as the KV cache keeps them.
    const int64_t stride = key_panels_size(d.ctx, c.head_dim);
    std::vector<float> panels(static_cast<size_t>(stride * c.kv_heads));
    for (int64_t h = 0; h < c.kv_heads; ++h) std::copy(d.kp[h].begin(), d.kp[h].end(), panels.begin() + h * stride);
    AttendArgs a = args(c, d, 0, joint.data());
    a.k = panels.data();
    a.n_kv = c.kv_heads;
    a.k_head_stride = stride;
    attend(a);
    for (size_t i = 0; i < each.size(); ++i)
      ASSERT_EQ(joint[i], each[i]) << "ntok " << c.ntok << " group " << c.group << " hd " << c.head_dim << " element " << i;
  }
}

TEST(Attention, KeyPanelsHoldEachPositionOnce) {
  const int64_t hd = 48, n = 70;
  std::vector<float> panels(static_cast<size_t>(key_panels_size(n, hd)), NAN);
  std::vector<float> key(static_cast<size_t>(hd));
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t d = 0; d < hd; ++d) key[static_cast<size_t>(d)] = static_cast<float>(p * 1000 + d);
    store_key(panels.data(), hd, p, key.data());
  }
  for (int64_t p = 0; p < n; ++p)
    for (int64_t d = 0; d < hd; ++d)
      ASSERT_EQ(panels[static_cast<size_t>(key_offset(p, d, hd))], static_cast<float>(p * 1000 + d)) << p << "," << d;
  // Lanes past the last position are zeros (a started panel is cleared), never left over.
  for (int64_t p = n; p < key_panels_size(n, hd) / hd; ++p)
    for (int64_t d = 0; d < hd; ++d) ASSERT_EQ(panels[static_cast<size_t>(key_offset(p, d, hd))], 0.0f);
}

TEST(Attention, NarrowHeadsHaveNoKernel) {
  EXPECT_FALSE(attend_available(8));
  EXPECT_FALSE(attend_available(0));
}

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

// The softmax's vector e^x: within 2 ulp of libm over the range a softmax sees (and beyond),
// 0 below the underflow edge, NaN through.
TEST(Attention, VectorExpIsWithinTwoUlpOfLibm) {
  std::vector<float> xs;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f, -0.5f, 1.0f}) xs.push_back(x);
  while (xs.size() % 16) xs.push_back(0.0f);
  for (size_t i = 0; i < xs.size(); i += 16) {
    float out[16];
    exp16(xs.data() + i, out);
    for (int j = 0; j < 16; ++j) {
      const float want = std::exp(xs[i + j]);
      EXPECT_LE(std::fabs(out[j] - want), 2 * (std::nextafter(want, INFINITY) - want)) << "x = " << xs[i + j];
    }
  }
  float edge[16] = {-90.0f, -1000.0f, NAN, -INFINITY};
  exp16(edge, edge);
  EXPECT_EQ(edge[0], 0.0f);
  EXPECT_EQ(edge[1], 0.0f);
  EXPECT_TRUE(std::isnan(edge[2]));
  EXPECT_EQ(edge[3], 0.0f);
}
#endif

}  // namespace
}  // namespace orchard
