// Latent attention's kernels: integer levels of the quantized formats (quant.h's row_levels),
// products over them (level_matrix.h) and the passes over a latent cache
// (latent_attention_kernels.h) — every SIMD ISA against the scalar reference bit for bit, and
// the reference against double-precision arithmetic on the dequantized values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "simd_isas.h"
#include "tensor/attention.h"
#include "tensor/kernels/kernels.h"
#include "tensor/latent_attention_kernels.h"
#include "tensor/level_matrix.h"
#include "tensor/quant.h"
#include "tensor/types.h"

namespace orchard {
namespace {

const DType kLevelTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(g) * scale;
  return v;
}

// rows × cols of type t from random values (every third row negated and shifted, so that
// negative scales and non-zero offsets occur).
std::vector<uint8_t> quantized(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> src = random_floats(static_cast<size_t>(rows * cols), seed, 0.1f);
  for (int64_t r = 0; r < rows; r += 3)
    for (int64_t c = 0; c < cols; ++c) src[static_cast<size_t>(r * cols + c)] = 0.05f - src[static_cast<size_t>(r * cols + c)];
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, &src[static_cast<size_t>(r * cols)], &q[rb * static_cast<size_t>(r)], cols);
  return q;
}

TEST(Levels, GiveTheDequantizedValuesExactly) {
  for (DType t : kLevelTypes) {
    SCOPED_TRACE(type_name(t));
    const int64_t n = 512;
    const std::vector<uint8_t> q = quantized(t, 3, n, 7);
    const size_t rb = row_bytes(t, n);
    for (int r = 0; r < 3; ++r) {
      std::vector<int8_t> lv(n);
      std::vector<float> scale(n / 16), offset(n / 16), values(n);
      ASSERT_TRUE(row_levels(t, &q[rb * r], lv.data(), scale.data(), offset.data(), n));
      dequantize_row(t, &q[rb * r], values.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float product = scale[i / 16] * static_cast<float>(lv[i]);
        ASSERT_EQ(product + offset[i / 16], values[i]) << "element " << i << " of row " << r;
      }
    }
  }
}

TEST(Levels, FormatsWithoutLevelsSaySo) {
  std::vector<int8_t> lv(256);
  std::vector<float> scale(16), offset(16);
  std::vector<uint8_t> bytes(4096);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q2_K, DType::Q3_K})
    EXPECT_FALSE(row_levels(t, bytes.data(), lv.data(), scale.data(), offset.data(), 256)) << type_name(t);
}

// y = x·M in double over the dequantized rows, M (or its transpose) held as `rows` rows of t.
std::vector<double> double_product(DType t, const std::vector<uint8_t>& q, int64_t rows, int64_t cols, bool transposed,
                                   const std::vector<float>& x) {
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = row_bytes(t, cols);
  std::vector<double> y(static_cast<size_t>(transposed ? rows : cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, &q[rb * static_cast<size_t>(r)], row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      if (transposed) y[static_cast<size_t>(r)] += static_cast<double>(x[static_cast<size_t>(c)]) * row[static_cast<size_t>(c)];
      else y[static_cast<size_t>(c)] += static_cast<double>(x[static_cast<size_t>(r)]) * row[static_cast<size_t>(c)];
    }
  }
  return y;
}

TEST(Levels, ProductsMatchTheReferenceOnEveryIsaAndDoublePrecision) {
  const int64_t shapes[][2] = {{64, 256}, {1, 32}, {16, 64}, {32, 96}, {128, 512}, {48, 160}};
  for (DType t : kLevelTypes)
    for (const auto& shape : shapes)
      for (bool transposed : {false, true}) {
        const int64_t rows = shape[0], cols = type_info(t).block_elems > 32 ? shape[1] / 256 * 256 : shape[1];
        if (cols == 0) continue;
        SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "×" + std::to_string(cols) +
                     (transposed ? " transposed" : ""));
        const std::vector<uint8_t> q = quantized(t, rows, cols, static_cast<uint32_t>(rows * 31 + cols));
        LevelStore m;
        if (!levels_from_rows(t, q.data(), row_bytes(t, cols), rows, cols, transposed, m)) {
          ASSERT_TRUE(transposed && rows % 16 != 0) << "levels refused";
          continue;
        }
        const int64_t in = m.view.rows, out = m.view.cols;
        const std::vector<float> x = random_floats(static_cast<size_t>(in), 99);
        std::vector<float> ref(static_cast<size_t>(out));
        vec_times_levels_reference(m.view, x.data(), ref.data());
        const std::vector<double> exact = double_product(t, q, rows, cols, transposed, x);
        for (int64_t c = 0; c < out; ++c)
          ASSERT_NEAR(ref[static_cast<size_t>(c)], exact[static_cast<size_t>(c)], 1e-4 * (1.0 + std::fabs(exact[static_cast<size_t>(c)])));
        for (kernels::Isa isa : test::simd_isas()) {
          const kernels::LevelProductFn fn = kernels::lookup_level_product(isa);
          ASSERT_NE(fn, nullptr) << kernels::isa_name(isa);
          std::vector<float> y(static_cast<size_t>(out), -1.0f);
          fn(m.view, x.data(), 1, 0, y.data(), 0);
          for (int64_t c = 0; c < out; ++c)
            ASSERT_EQ(y[static_cast<size_t>(c)], ref[static_cast<size_t>(c)]) << kernels::isa_name(isa) << " column " << c;
          // Several rows at once (a prompt): each the bits it gets alone, whatever its place.
          for (int64_t n : {2, 3, 4, 5, 9}) {
            const int64_t xs = in + 3, ys = out + 5;  // strides wider than a row
            std::vector<float> xn = random_floats(static_cast<size_t>(n * xs), static_cast<uint32_t>(n));
            std::vector<float> yn(static_cast<size_t>(n * ys), -1.0f), one(static_cast<size_t>(out));
            fn(m.view, xn.data(), n, xs, yn.data(), ys);
            for (int64_t t = 0; t < n; ++t) {
              vec_times_levels_reference(m.view, &xn[static_cast<size_t>(t * xs)], one.data());
              for (int64_t c = 0; c < out; ++c)
                ASSERT_EQ(yn[static_cast<size_t>(t * ys + c)], one[static_cast<size_t>(c)])
                    << kernels::isa_name(isa) << " row " << t << " of " << n << ", column " << c;
            }
          }
        }
      }
}

// A cache of `len` random keys of kd dims in panels.
std::vector<float> key_panels(int64_t len, int64_t kd, uint32_t seed) {
  std::vector<float> panels(static_cast<size_t>(key_panels_size(len, kd)), 0.0f);
  const std::vector<float> keys = random_floats(static_cast<size_t>(len * kd), seed);
  for (int64_t p = 0; p < len; ++p) store_key(panels.data(), kd, p, &keys[static_cast<size_t>(p * kd)]);
  return panels;
}

TEST(LatentAttention, ScoresAndMixMatchTheReferenceOnEveryIsa) {
  const int64_t kd = 48, lora = 32;
  for (int64_t len : {1, 5, 32, 33, 100})
    for (int heads : {1, 2, 3, 4, 5, 9}) {
      SCOPED_TRACE("len " + std::to_string(len) + ", heads " + std::to_string(heads));
      const std::vector<float> panels = key_panels(len, kd, static_cast<uint32_t>(len));
      const int64_t stride = key_panels_size(len, 1);
      const std::vector<float> query = random_floats(static_cast<size_t>(heads * kd), 5);
      std::vector<float> weights = random_floats(static_cast<size_t>(heads * stride), 6);
      for (int h = 0; h < heads; ++h)
        for (int64_t p = len; p < stride; ++p) weights[static_cast<size_t>(h * stride + p)] = 0.0f;
      std::vector<const float*> qs, ws;
      for (int h = 0; h < heads; ++h) {
        qs.push_back(&query[static_cast<size_t>(h * kd)]);
        ws.push_back(&weights[static_cast<size_t>(h * stride)]);
      }
      auto run = [&](const kernels::LatentFns* fns, std::vector<float>& scores, std::vector<float>& lat) {
        scores.assign(static_cast<size_t>(heads * stride), -1.0f);
        lat.assign(static_cast<size_t>(heads * lora), -1.0f);
        std::vector<float*> ss, ls;
        for (int h = 0; h < heads; ++h) {
          ss.push_back(&scores[static_cast<size_t>(h * stride)]);
          ls.push_back(&lat[static_cast<size_t>(h * lora)]);
        }
        const LatentScoresArgs sa{qs.data(), heads, panels.data(), kd, len, ss.data()};
        const LatentMixArgs ma{ws.data(), heads, panels.data(), kd, lora, len, ls.data()};
        if (fns) fns->scores(sa), fns->mix(ma);
        else latent_scores_reference(sa), latent_mix_reference(ma);
      };
      std::vector<float> scores, lat;
      run(nullptr, scores, lat);
      // against double precision
      for (int h = 0; h < heads; ++h) {
        for (int64_t p = 0; p < len; ++p) {
          double s = 0;
          for (int64_t d = 0; d < kd; ++d) s += static_cast<double>(query[static_cast<size_t>(h * kd + d)]) * panels[static_cast<size_t>(key_offset(p, d, kd))];
          ASSERT_NEAR(scores[static_cast<size_t>(h * stride + p)], s, 1e-4 * (1 + std::fabs(s)));
        }
        for (int64_t d = 0; d < lora; ++d) {
          double s = 0;
          for (int64_t p = 0; p < len; ++p) s += static_cast<double>(weights[static_cast<size_t>(h * stride + p)]) * panels[static_cast<size_t>(key_offset(p, d, kd))];
          ASSERT_NEAR(lat[static_cast<size_t>(h * lora + d)], s, 1e-4 * (1 + std::fabs(s)));
        }
      }
      for (kernels::Isa isa : test::simd_isas()) {
        const kernels::LatentFns* fns = kernels::lookup_latent(isa);
        ASSERT_NE(fns, nullptr) << kernels::isa_name(isa);
        std::vector<float> s2, l2;
        run(fns, s2, l2);
        for (int h = 0; h < heads; ++h)
          for (int64_t p = 0; p < len; ++p)
            ASSERT_EQ(s2[static_cast<size_t>(h * stride + p)], scores[static_cast<size_t>(h * stride + p)]) << kernels::isa_name(isa);
        EXPECT_EQ(l2, lat) << kernels::isa_name(isa);
      }
    }
}

}  // namespace
}  // namespace orchard
