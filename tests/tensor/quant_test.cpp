// Block formats against llama.cpp's own files: dequantized values must be bitwise those of
// gguf-py/ggml, and our quantizers must reproduce llama-quantize's bytes.  Plus dot products
// against a double reference, round-trip error bounds, and fp16/bf16 edge cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "model/gguf.h"
#include "tensor/error.h"
#include "tensor/f16.h"
#include "tensor/quant.h"
#include "tensor/types.h"
#include "test_data.h"

namespace orchard {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::vector<float> normal_floats(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::unique_ptr<GGUFFile> open_zoo(const std::string& variant) {
  return GGUFFile::open(test::data_file("golden/quant/randllama." + variant + ".gguf").string());
}

// ---- dequantization vs gguf-py's .f32 dumps --------------------------------------------------

struct GoldenCase {
  const char* variant;  // file name part
  DType type;           // type of every matrix in that file
};

const GoldenCase kGolden[] = {
    {"F16", DType::F16},       {"BF16", DType::BF16},     {"Q8_0", DType::Q8_0},
    {"Q6_K", DType::Q6_K},     {"Q5_K_S", DType::Q5_K},   {"Q5_1", DType::Q5_1},
    {"Q5_0", DType::Q5_0},     {"Q4_K_S", DType::Q4_K},   {"Q4_1", DType::Q4_1},
    {"Q4_0", DType::Q4_0},     {"Q3_K_S", DType::Q3_K},   {"Q2_K", DType::Q2_K},
};

class GoldenDequantize : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenDequantize, BitwiseEqualToGgufPy) {
  ORCHARD_REQUIRE_DATA();
  const GoldenCase& c = GetParam();
  auto file = open_zoo(c.variant);
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
    SCOPED_TRACE(std::string(c.variant) + " " + name);
    const GGUFTensorInfo* t = file->find_tensor(name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, c.type);
    const std::vector<float> want = test::read_f32(test::data_file(
        std::string("golden/quant/randllama.") + c.variant + "." + name + ".f32"));
    ASSERT_EQ(static_cast<int64_t>(want.size()), t->n_elements());

    // Row by row, as a model loader would call it.
    const int64_t cols = t->ne[0];
    const int64_t rows = t->n_elements() / cols;
    const size_t rb = row_bytes(t->type, cols);
    std::vector<float> got(want.size());
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t->type, file->tensor_data(*t) + r * rb, got.data() + r * cols, cols);

    size_t mismatches = 0;
    size_t first = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (bits(got[i]) != bits(want[i]) && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << "first at element " << first << ": got " << got[first]
                              << " want " << want[first];
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, GoldenDequantize, ::testing::ValuesIn(kGolden),
                         [](const auto& info) { return std::string(info.param.variant); });

TEST(GoldenDequantize, F32IsTheStoredBytes) {
  ORCHARD_REQUIRE_DATA();
  auto file = open_zoo("F32");
  const GGUFTensorInfo* t = file->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  std::vector<float> got(static_cast<size_t>(t->n_elements()));
  dequantize_row(DType::F32, file->tensor_data(*t), got.data(), t->n_elements());
  EXPECT_EQ(std::memcmp(got.data(), file->tensor_data(*t), got.size() * 4), 0);
}

// ---- quantizers vs llama-quantize --pure ----------------------------------------------------

struct QuantCase {
  const char* variant;
  DType type;
};

const QuantCase kQuantizers[] = {
    {"Q8_0", DType::Q8_0}, {"Q4_0", DType::Q4_0}, {"Q4_1", DType::Q4_1}, {"Q5_0", DType::Q5_0},
    {"Q5_1", DType::Q5_1}, {"F16", DType::F16},   {"BF16", DType::BF16},
    {"Q4_K_S", DType::Q4_K}, {"Q5_K_S", DType::Q5_K}, {"Q6_K", DType::Q6_K},
};

class GoldenQuantize : public ::testing::TestWithParam<QuantCase> {};

TEST_P(GoldenQuantize, ByteEqualToLlamaQuantize) {
  ORCHARD_REQUIRE_DATA();
  const QuantCase& c = GetParam();
  auto f32 = open_zoo("F32");
  auto quant = open_zoo(c.variant);
  int matrices = 0;
  for (const GGUFTensorInfo& src : f32->tensors()) {
    if (src.ne.size() < 2) continue;  // norms stay F32 in every variant
    SCOPED_TRACE(src.name);
    const GGUFTensorInfo* ref = quant->find_tensor(src.name);
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->type, c.type);
    ASSERT_EQ(src.type, DType::F32);
    const int64_t cols = src.ne[0];
    const int64_t rows = src.n_elements() / cols;
    const size_t rb = row_bytes(c.type, cols);
    ASSERT_EQ(ref->nbytes, rb * static_cast<size_t>(rows));
    std::vector<uint8_t> got(rb);
    const auto* x = reinterpret_cast<const float*>(f32->tensor_data(src));
    int64_t bad_rows = 0;
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(c.type, x + r * cols, got.data(), cols);
      if (std::memcmp(got.data(), quant->tensor_data(*ref) + r * rb, rb) != 0) ++bad_rows;
    }
    EXPECT_EQ(bad_rows, 0) << "of " << rows << " rows";
    ++matrices;
  }
  EXPECT_EQ(matrices, 16);
}

INSTANTIATE_TEST_SUITE_P(Zoo, GoldenQuantize, ::testing::ValuesIn(kQuantizers),
                         [](const auto& info) { return std::string(info.param.variant); });

// ---- dot products against double precision ---------------------------------------------------

// Weight bytes for any format: random bytes, with every fp16 scale field overwritten by a sane
// value so the block decodes to finite numbers.  Scale offsets are those of ggml's layouts.
std::vector<uint8_t> random_weights(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const TypeInfo& info = type_info(t);
  if (info.block_elems == 1) {
    const std::vector<float> v = normal_floats(static_cast<size_t>(n), 1.0f, seed);
    std::vector<uint8_t> out(row_bytes(t, n));
    quantize_row(t, v.data(), out.data(), n);
    return out;
  }
  std::vector<uint8_t> out(row_bytes(t, n));
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::vector<size_t> half_fields;  // byte offsets of fp16 scales within a block
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: half_fields = {0}; break;
    case DType::Q4_1: case DType::Q5_1: half_fields = {0, 2}; break;
    case DType::Q2_K: half_fields = {80, 82}; break;
    case DType::Q3_K: half_fields = {108}; break;
    case DType::Q4_K: case DType::Q5_K: half_fields = {0, 2}; break;
    case DType::Q6_K: half_fields = {208}; break;
    default: break;
  }
  for (size_t blk = 0; blk < out.size() / info.block_bytes; ++blk) {
    uint8_t* p = out.data() + blk * info.block_bytes;
    for (size_t off : half_fields) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(p + off, &h, 2);
    }
    if (t == DType::Q8_K) {  // float scale
      const float d = scale(rng);
      std::memcpy(p, &d, 4);
    }
    if (t == DType::Q4_1 || t == DType::Q5_1) {  // the min m is signed
      const uint16_t h = fp32_to_fp16(-scale(rng) * 8);
      std::memcpy(p + 2, &h, 2);
    }
  }
  return out;
}

const DType kQuantWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

class VecDot : public ::testing::TestWithParam<DType> {};

TEST_P(VecDot, MatchesDoubleReferenceOnDequantizedOperands) {
  const DType wt = GetParam();
  const DType xt = vec_dot_type(wt);
  const int64_t n = 1024;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const std::vector<uint8_t> w = random_weights(wt, n, seed);
    const std::vector<float> x = normal_floats(n, 1.0f, 100 + seed);
    std::vector<uint8_t> xq(row_bytes(xt, n));
    quantize_row(xt, x.data(), xq.data(), n);

    std::vector<float> wf(n), xf(n);
    dequantize_row(wt, w.data(), wf.data(), n);
    dequantize_row(xt, xq.data(), xf.data(), n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += static_cast<double>(wf[i]) * xf[i];
      mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
    }
    // Integer sums are exact; what remains is float rounding of per-block terms.  Q8_1 carries
    // s = fp16(d * sum q), which the dot uses for the weight's offset term while dequantization
    // uses fp16(d) * q: those two differ by fp16 rounding, hence the looser bound.
    const double rel = (xt == DType::Q8_1) ? 2e-3 : 1e-5;
    const float got = vec_dot(wt, w.data(), xq.data(), n);
    EXPECT_NEAR(got, ref, rel * mag + 1e-6) << type_name(wt) << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, VecDot, ::testing::ValuesIn(kQuantWeightTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(VecDot, TypePairingFollowsGgml) {
  EXPECT_EQ(vec_dot_type(DType::F32), DType::F32);
  EXPECT_EQ(vec_dot_type(DType::F16), DType::F16);
  EXPECT_EQ(vec_dot_type(DType::BF16), DType::BF16);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) EXPECT_EQ(vec_dot_type(t), DType::Q8_0);
  for (DType t : {DType::Q4_1, DType::Q5_1}) EXPECT_EQ(vec_dot_type(t), DType::Q8_1);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K})
    EXPECT_EQ(vec_dot_type(t), DType::Q8_K);
}

// ---- round trips ----------------------------------------------------------------------------

class RoundTrip : public ::testing::TestWithParam<DType> {};

// Largest error a correct quantizer may make on one block: half a step, plus the rounding of
// the fp16 scale and offset (relative 2^-11 of the block's range).  Q4_0/Q5_0 map the signed
// extreme to -8/-16, so a value of opposite sign and similar size lands on +8/+16, which is
// clamped to 7/15: up to a whole step off.
double allowed_error(DType t, const float* x, int64_t n) {
  double mn = x[0], mx = x[0], amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min<double>(mn, x[i]);
    mx = std::max<double>(mx, x[i]);
    amax = std::max<double>(amax, std::fabs(x[i]));
  }
  const double fp16_slack = amax * std::ldexp(1.0, -10);
  switch (t) {
    case DType::Q8_0: case DType::Q8_1: return 0.5 * amax / 127 + fp16_slack;
    case DType::Q8_K: return 0.5 * amax / 127 * 1.0001;
    case DType::Q4_0: return amax / 8 + fp16_slack;
    case DType::Q5_0: return amax / 16 + fp16_slack;
    case DType::Q4_1: return 0.5 * (mx - mn) / 15 + fp16_slack;
    case DType::Q5_1: return 0.5 * (mx - mn) / 31 + fp16_slack;
    default: return 0;
  }
}

TEST_P(RoundTrip, ErrorWithinHalfAStep) {
  const DType t = GetParam();
  const int64_t n = 4096;
  const std::vector<float> x = normal_floats(n, 1.0f, 7);
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), n);
  const int64_t blk = type_info(t).block_elems;
  for (int64_t i = 0; i < n; ++i) {
    double bound;
    if (t == DType::F32) bound = 0;
    else if (t == DType::F16) bound = std::fabs(x[i]) * std::ldexp(1.0, -11);
    else if (t == DType::BF16) bound = std::fabs(x[i]) * std::ldexp(1.0, -8);
    else bound = allowed_error(t, x.data() + i / blk * blk, blk);
    ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << type_name(t) << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Quantizable, RoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q8_1, DType::Q8_K, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(RoundTrip, Q8_1StoresScaledSum) {
  const std::vector<float> x = normal_floats(32, 1.0f, 3);
  std::vector<uint8_t> q(row_bytes(DType::Q8_1, 32));
  quantize_row(DType::Q8_1, x.data(), q.data(), 32);
  uint16_t d16, s16;
  std::memcpy(&d16, q.data(), 2);
  std::memcpy(&s16, q.data() + 2, 2);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(q[4 + j]);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(d16, fp32_to_fp16(amax / 127.0f));
  EXPECT_EQ(s16, fp32_to_fp16(static_cast<float>(sum) * (amax / 127.0f)));
}

// Weights (llama-quantize: ggml's quantize_row_q8_0_ref) and activations (ggml's x86
// quantize_row_q8_0, what llama.cpp's matmuls run on x86) round differently: q = roundf(x / d)
// against round-half-even(x · 127/amax). Golden logits of quantized mixtures depend on it.
TEST(RoundTrip, Q8_0ActivationsRoundAsGgmlsX86Backend) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127: d = 1, id = 1, so x · id is x itself
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  x[4] = 0.5f;
  std::vector<uint8_t> w(34), a(34);
  quantize_row(DType::Q8_0, x.data(), w.data(), 32);
  quantize_activations(DType::Q8_0, x.data(), a.data(), 32);
  const auto* qw = reinterpret_cast<const int8_t*>(w.data() + 2);
  const auto* qa = reinterpret_cast<const int8_t*>(a.data() + 2);
  EXPECT_EQ(std::vector<int>(qw, qw + 5), (std::vector<int>{127, 3, -3, 4, 1}));  // halves away from zero
  EXPECT_EQ(std::vector<int>(qa, qa + 5), (std::vector<int>{127, 2, -2, 4, 0}));  // halves to even
  EXPECT_EQ(std::memcmp(w.data(), a.data(), 2), 0) << "the same scale d = amax/127";

  // 127/amax is not always 1/(amax/127) (an ulp apart): the activations follow the first.
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    for (float& v : x) v = nd(rng);
    quantize_activations(DType::Q8_0, x.data(), a.data(), 32);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(static_cast<int8_t>(a[2 + j]), static_cast<int8_t>(std::nearbyint(x[j] * (127.0f / amax))));
  }
}

TEST(RoundTrip, Q8_KBlockSumsAndScale) {
  std::vector<float> x = normal_floats(512, 1.0f, 5);
  x[300] = -9.0f;  // the block's signed extreme maps to exactly -127, so d = 9/127 > 0
  std::vector<uint8_t> q(row_bytes(DType::Q8_K, 512));
  quantize_row(DType::Q8_K, x.data(), q.data(), 512);
  const uint8_t* b1 = q.data() + 292;
  float d;
  std::memcpy(&d, b1, 4);
  EXPECT_EQ(static_cast<int8_t>(b1[4 + 300 - 256]), -127);
  EXPECT_FLOAT_EQ(d, 9.0f / 127.0f);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += static_cast<int8_t>(b1[4 + 16 * g + l]);
    int16_t bs;
    std::memcpy(&bs, b1 + 4 + 256 + 2 * g, 2);
    EXPECT_EQ(bs, sum) << "group " << g;
  }
  // An all-zero block quantizes to zeros with d = 0.
  std::vector<float> z(256, 0.0f);
  quantize_row(DType::Q8_K, z.data(), q.data(), 256);
  for (size_t i = 0; i < 292; ++i) EXPECT_EQ(q[i], 0) << i;
}

TEST(RoundTrip, ZeroBlocksGiveZeros) {
  const std::vector<float> z(64, 0.0f);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1}) {
    std::vector<uint8_t> q(row_bytes(t, 64));
    quantize_row(t, z.data(), q.data(), 64);
    std::vector<float> y(64, 1.0f);
    dequantize_row(t, q.data(), y.data(), 64);
    for (float v : y) EXPECT_EQ(v, 0.0f) << type_name(t);
  }
}

// ---- fp16 / bf16 ----------------------------------------------------------------------------

TEST(Fp16, EveryHalfSurvivesARoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

TEST(Fp16, DecodesKnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(fp16_to_fp32(0x8000)), 0x80000000u);
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, even stays
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // tie between 65504 and 2^16: even is infinity
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  // Subnormals: 2^-25 is a tie between 0 and 2^-24 and goes to 0; 3 * 2^-25 goes to 2 * 2^-24.
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(fp32_to_fp16(5 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1e-45f), 0x0000);  // float subnormal
}

TEST(Fp16, NaNStaysQuietNaN) {
  const uint16_t h = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7E00, 0x7E00);
  const uint16_t s = fp32_to_fp16(from_bits(0xFF800001u));  // signalling, negative, tiny payload
  EXPECT_EQ(s & 0xFE00, 0xFE00);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(s)));
}

#if defined(__F16C__)
TEST(Fp16, MatchesF16CHardware) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns cover every exponent, including the ones that overflow or vanish.
    const float f = from_bits(static_cast<uint32_t>(rng()));
    const uint16_t hw = static_cast<uint16_t>(_cvtss_sh(f, 0));
    ASSERT_EQ(fp32_to_fp16(f), hw) << std::hex << bits(f);
  }
  for (uint32_t e = 0x30000000u; e < 0x48000000u; e += 0x1000u) {  // the interesting range
    const float f = from_bits(e | 0xFFFu);
    ASSERT_EQ(fp32_to_fp16(f), static_cast<uint16_t>(_cvtss_sh(f, 0))) << std::hex << e;
  }
}
#endif

TEST(Bf16, RoundsToNearestEvenAndKeepsSubnormals) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie, even stays
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(std::ldexp(1.0f, -130)), 0x0008);  // float subnormal, kept
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
  EXPECT_EQ(fp32_to_bf16(from_bits(0xFFFFFFFFu)), 0xFFFF);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h);
  }
}

// ---- errors ---------------------------------------------------------------------------------

template <typename F>
void expect_quant_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no orchard::Error thrown (expected one naming " << needle << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(QuantErrors, NonComputableTypesAreRefused) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(256);
  expect_quant_error([&] { dequantize_row(DType::IQ2_XXS, buf.data(), f.data(), 256); }, "IQ2_XXS");
  expect_quant_error([&] { quantize_row(DType::IQ4_NL, f.data(), buf.data(), 256); }, "IQ4_NL");
  expect_quant_error([&] { vec_dot(DType::IQ2_XXS, buf.data(), buf.data(), 256); }, "IQ2_XXS");
  expect_quant_error([&] { vec_dot_type(DType::TQ1_0); }, "TQ1_0");
  expect_quant_error([&] { dequantize_row(DType::I32, buf.data(), f.data(), 4); }, "I32");
  // Formats we read but do not write.
  expect_quant_error([&] { quantize_row(DType::Q3_K, f.data(), buf.data(), 256); }, "Q3_K");
  // Q8_1 is an activation format only.
  expect_quant_error([&] { vec_dot(DType::Q8_1, buf.data(), buf.data(), 32); }, "Q8_1");
}

TEST(QuantErrors, PartialBlocksAreRefused) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(512);
  expect_quant_error([&] { dequantize_row(DType::Q4_0, buf.data(), f.data(), 33); }, "Q4_0");
  expect_quant_error([&] { quantize_row(DType::Q8_0, f.data(), buf.data(), 48); }, "Q8_0");
  expect_quant_error([&] { dequantize_row(DType::Q6_K, buf.data(), f.data(), 128); }, "Q6_K");
  expect_quant_error([&] { vec_dot(DType::Q4_K, buf.data(), buf.data(), 300); }, "Q4_K");
  expect_quant_error([&] { dequantize_row(DType::F16, buf.data(), f.data(), -1); }, "F16");
  // Zero elements is a valid, empty row.
  EXPECT_NO_THROW(dequantize_row(DType::Q4_0, buf.data(), f.data(), 0));
  EXPECT_EQ(vec_dot(DType::Q8_0, buf.data(), buf.data(), 0), 0.0f);
}

}  // namespace
}  // namespace orchard
