// matvec / matmul / get_row: consistency between the entry points and vec_dot, closeness to a
// double-precision product, the real zoo tensors, and shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "tensor/error.h"
#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/types.h"
#include "test_data.h"

namespace orchard {
namespace {

std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A rows x cols matrix in format t: quantized from random floats where we have a quantizer,
// otherwise random bytes with every block's scale fields set to small finite values.
std::vector<uint8_t> random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  const std::vector<float> v = normal_floats(static_cast<size_t>(rows * cols), seed);
  try {
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, v.data() + r * cols, out.data() + r * rb, cols);
    if (t != DType::Q8_K) return out;  // Q8_K's quantizer is fine, but test its random bytes too
  } catch (const Error&) {
  }
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  const TypeInfo& info = type_info(t);
  std::vector<size_t> halves;  // fp16 scale offsets within a block (ggml layouts)
  if (t == DType::Q2_K) halves = {80, 82};
  if (t == DType::Q3_K) halves = {108};
  if (t == DType::Q4_K || t == DType::Q5_K) halves = {0, 2};
  if (t == DType::Q6_K) halves = {208};
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (size_t b = 0; b < out.size() / info.block_bytes; ++b) {
    uint8_t* p = out.data() + b * info.block_bytes;
    for (size_t off : halves) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(p + off, &h, 2);
    }
    if (t == DType::Q8_K) {
      const float d = scale(rng);
      std::memcpy(p, &d, 4);
    }
  }
  return out;
}

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

// How far one activation may move when converted to format t (absolute, for a row with
// largest magnitude amax): half a quantization step, or the relative rounding of a float type.
double activation_step(DType t, double amax) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return amax * std::ldexp(1.0, -11);
    case DType::BF16: return amax * std::ldexp(1.0, -8);
    default: return amax * 0.5 / 127 * 1.01;  // Q8_0, Q8_1, Q8_K
  }
}

// |y - W x| bound: activation rounding times sum |w|, plus float accumulation slack.
void expect_close_to_double(const MatrixView& w, const float* x, const float* y) {
  const DType xt = vec_dot_type(w.type);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    get_row(w, r, row.data());
    double ref = 0, mag = 0, wabs = 0, amax = 0;
    for (int64_t c = 0; c < w.cols; ++c) {
      ref += static_cast<double>(row[c]) * x[c];
      mag += std::fabs(static_cast<double>(row[c]) * x[c]);
      wabs += std::fabs(row[c]);
    }
    // Activations are quantized per block; the largest block amax bounds every block's step.
    for (int64_t c = 0; c < w.cols; ++c) amax = std::max(amax, static_cast<double>(std::fabs(x[c])));
    const double tol = wabs * activation_step(xt, amax) + 2e-3 * mag + 1e-5;
    ASSERT_NEAR(y[r], ref, tol) << type_name(w.type) << " row " << r;
  }
}

class Matmul : public ::testing::TestWithParam<DType> {};

TEST_P(Matmul, MatvecIsVecDotOfEachRow) {
  const DType t = GetParam();
  const int64_t rows = 6, cols = 512;
  const std::vector<uint8_t> wb = random_matrix(t, rows, cols, 21);
  const MatrixView w{t, rows, cols, wb.data()};
  const std::vector<float> x = normal_floats(cols, 22);
  std::vector<uint8_t> scratch;
  std::vector<float> y(rows);
  matvec(w, x.data(), y.data(), scratch);

  const DType xt = vec_dot_type(t);
  std::vector<uint8_t> xq(row_bytes(xt, cols));
  quantize_activations(xt, x.data(), xq.data(), cols);
  // SIMD kernels add in another order than the scalar reference: equal up to float rounding.
  for (int64_t r = 0; r < rows; ++r) {
    const float ref = vec_dot(t, wb.data() + r * row_bytes(t, cols), xq.data(), cols);
    EXPECT_NEAR(y[r], ref, 1e-4f * (1.0f + std::fabs(ref))) << "row " << r;
  }
  expect_close_to_double(w, x.data(), y.data());
}

TEST_P(Matmul, EachTokenOfABatchEqualsMatvec) {
  const DType t = GetParam();
  const int64_t rows = 5, cols = 768, n_tokens = 4;
  const std::vector<uint8_t> wb = random_matrix(t, rows, cols, 31);
  const MatrixView w{t, rows, cols, wb.data()};
  const std::vector<float> x = normal_floats(cols * n_tokens, 32);
  std::vector<uint8_t> scratch;
  std::vector<float> y(rows * n_tokens);
  matmul(w, x.data(), n_tokens, y.data(), scratch);
  for (int64_t tok = 0; tok < n_tokens; ++tok) {
    std::vector<uint8_t> fresh;  // a separate scratch: results must not depend on its history
    std::vector<float> yt(rows);
    matvec(w, x.data() + tok * cols, yt.data(), fresh);
    // One token may take a dedicated kernel that adds in another order: float rounding only.
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_NEAR(y[tok * rows + r], yt[r], 1e-4f * (1.0f + std::fabs(yt[r])))
          << "token " << tok << " row " << r;
  }
}

TEST_P(Matmul, GetRowIsDequantizeRow) {
  const DType t = GetParam();
  const int64_t rows = 3, cols = 256;
  const std::vector<uint8_t> wb = random_matrix(t, rows, cols, 41);
  const MatrixView w{t, rows, cols, wb.data()};
  std::vector<float> got(cols), want(cols);
  for (int64_t r = 0; r < rows; ++r) {
    get_row(w, r, got.data());
    dequantize_row(t, wb.data() + r * row_bytes(t, cols), want.data(), cols);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), cols * sizeof(float)), 0) << "row " << r;
  }
}

// Weights repacked at load (where this CPU has a layout for the type) give the products of the
// original rows, and where matmul reads only the packed copy the original may go: every token
// count still works, and a token's bits alone equal its bits among others.
TEST_P(Matmul, RepackedWeightsServeEveryTokenCount) {
  const DType t = GetParam();
  // 2560 columns: where a layout stores long rows in slabs, one whole slab and a short one.
  // 96 rows: whole groups for every layout (16 or 32 rows), split unevenly between 2 threads.
  const int64_t rows = 96, cols = 2560, most = 33;
  const std::vector<uint8_t> wb = random_matrix(t, rows, cols, 61);
  MatrixView w{t, rows, cols, wb.data()};
  const std::vector<float> x = normal_floats(cols * most, 62);
  std::vector<uint8_t> scratch;
  std::vector<float> want(rows * most), got(rows * most), alone(rows);
  matmul(w, x.data(), most, want.data(), scratch);
  // A layout may sum a row in another order than the row-major kernels (NEON's F16 groups: one
  // chain where the tiles keep four lanes), so the tolerance grows with the row's length.
  const float tol = 2e-5f * std::sqrt(static_cast<float>(cols));
  const std::unique_ptr<HugeBuffer> packed = pack_for_cpu(w);
  if (!packed) {
    EXPECT_FALSE(pack_replaces_original(t));
    GTEST_SKIP() << type_name(t) << " has no repacked layout on this CPU";
  }
  if (pack_replaces_original(t)) w.data = nullptr;
  // Short batches in one pass, a full pass of 16, and batches shared by two or three passes.
  for (int64_t n_tokens : {2, 3, 5, 7, 9, 12, 15, 16, 17, 31, 33}) {
    matmul(w, x.data(), n_tokens, got.data(), scratch, /*batch_invariant=*/true);
    for (int64_t i = 0; i < rows * n_tokens; ++i)
      ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << n_tokens << " tokens, element " << i;
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
      matmul(w, x.data() + tok * cols, 1, alone.data(), scratch, /*batch_invariant=*/true);
      EXPECT_EQ(std::memcmp(alone.data(), got.data() + tok * rows, rows * sizeof(float)), 0)
          << n_tokens << " tokens, token " << tok;
      if (w.data) continue;
      matmul(w, x.data() + tok * cols, 1, alone.data(), scratch);  // the generation path
      EXPECT_EQ(std::memcmp(alone.data(), got.data() + tok * rows, rows * sizeof(float)), 0)
          << n_tokens << " tokens, token " << tok;
    }
    // Without the promise, many tokens may take a faster kernel; still the same products.
    matmul(w, x.data(), n_tokens, got.data(), scratch);
    for (int64_t i = 0; i < rows * n_tokens; ++i)
      ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << n_tokens << " tokens, element " << i;
  }
}

// F16 repacked into 32-row panels gives every token count the bits the row-major panels kernel
// gives a prompt: the same FMA chains, one per output over the columns in order.
TEST(Matmul, PackedF16GivesEveryTokenCountThePromptBits) {
  const int64_t rows = 64, cols = 4192, n = 40;  // 16 blocks of 256 columns and a short one
  const std::vector<uint8_t> wb = random_matrix(DType::F16, rows, cols, 91);
  MatrixView w{DType::F16, rows, cols, wb.data()};
  const std::vector<float> x = normal_floats(cols * n, 92);
  std::vector<uint8_t> scratch;
  std::vector<float> row_major(rows * n), want(rows * n), got(rows * n);
  matmul(w, x.data(), n, row_major.data(), scratch);
  const std::unique_ptr<HugeBuffer> packed = pack_for_cpu(w);
  if (!packed) GTEST_SKIP() << "no repacked F16 layout on this CPU";
  w.data = nullptr;
  matmul(w, x.data(), n, want.data(), scratch);
  // AVX-512's row-major prompt kernel sums in the packed layout's order (the same bits); AVX2's
  // row-major tiles sum in lanes, so there only to float rounding (of 4192 terms whose sum
  // cancels down to ~0.1: 1.4e-4 seen).
  for (size_t i = 0; i < want.size(); ++i) {
    if (kernels::detect_isa() == kernels::Isa::Avx512) {
      ASSERT_EQ(want[i], row_major[i]) << i;
    }
    ASSERT_NEAR(want[i], row_major[i], 1e-3f) << i;
  }
  for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{13}}) {
    std::fill(got.begin(), got.end(), -1.0f);
    for (int64_t t0 = 0; t0 < n; t0 += count) {
      const int64_t c = std::min(count, n - t0);
      matmul(w, x.data() + t0 * cols, c, got.data() + t0 * rows, scratch);
    }
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << count << " tokens a pass";
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, Matmul, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(Matmul, ScratchIsReusedAcrossShapes) {
  const std::vector<uint8_t> big = random_matrix(DType::Q4_K, 2, 1024, 51);
  const std::vector<uint8_t> small = random_matrix(DType::Q4_0, 2, 64, 52);
  const std::vector<float> x = normal_floats(1024, 53);
  std::vector<uint8_t> scratch, fresh;
  std::vector<float> y1(2), y2(2);
  matvec({DType::Q4_K, 2, 1024, big.data()}, x.data(), y1.data(), scratch);
  matvec({DType::Q4_0, 2, 64, small.data()}, x.data(), y1.data(), scratch);
  matvec({DType::Q4_0, 2, 64, small.data()}, x.data(), y2.data(), fresh);
  EXPECT_EQ(y1, y2);
}

TEST(Matmul, EmptyBatchAndEmptyMatrix) {
  const std::vector<uint8_t> wb = random_matrix(DType::Q8_0, 2, 32, 61);
  std::vector<uint8_t> scratch;
  float sentinel = 42.0f;
  matmul({DType::Q8_0, 2, 32, wb.data()}, nullptr, 0, &sentinel, scratch);
  EXPECT_EQ(sentinel, 42.0f);
  const float x[32] = {};
  matvec({DType::Q8_0, 0, 32, nullptr}, x, &sentinel, scratch);
  EXPECT_EQ(sentinel, 42.0f);
}

template <typename F>
void expect_error_naming(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no orchard::Error thrown (expected one naming " << needle << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MatmulErrors, ShapesAndTypesAreChecked) {
  std::vector<uint8_t> buf(1 << 16);
  std::vector<float> x(1024), y(64);
  std::vector<uint8_t> scratch;
  expect_error_naming([&] { matvec({DType::Q4_0, 4, 100, buf.data()}, x.data(), y.data(), scratch); }, "Q4_0");
  expect_error_naming([&] { matvec({DType::Q6_K, 4, 288, buf.data()}, x.data(), y.data(), scratch); }, "Q6_K");
  expect_error_naming([&] { matvec({DType::IQ2_XXS, 4, 256, buf.data()}, x.data(), y.data(), scratch); }, "IQ2_XXS");
  expect_error_naming([&] { matvec({DType::Q8_1, 4, 256, buf.data()}, x.data(), y.data(), scratch); }, "Q8_1");
  expect_error_naming([&] { matvec({DType::F32, -1, 256, buf.data()}, x.data(), y.data(), scratch); }, "negative");
  expect_error_naming([&] { matvec({DType::F32, 4, 256, nullptr}, x.data(), y.data(), scratch); }, "no data");
  expect_error_naming([&] { matmul({DType::F32, 4, 256, buf.data()}, x.data(), -2, y.data(), scratch); }, "token");
  expect_error_naming([&] { get_row({DType::Q8_0, 4, 64, buf.data()}, 4, y.data()); }, "row 4");
  expect_error_naming([&] { get_row({DType::Q8_0, 4, 64, buf.data()}, -1, y.data()); }, "row -1");
  expect_error_naming([&] { get_row({DType::Q2_K, 4, 200, buf.data()}, 0, y.data()); }, "Q2_K");
}

// The zoo's real weights through matvec, against gguf-py's dequantized values in double.
TEST(MatmulZoo, FfnDownOfEveryVariant) {
  ORCHARD_REQUIRE_DATA();
  const std::vector<float> x = normal_floats(768, 71);
  for (const char* v : {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_S",
                        "Q4_1", "Q4_0", "Q3_K_S", "Q2_K"}) {
    SCOPED_TRACE(v);
    auto file = GGUFFile::open(test::data_file(std::string("golden/quant/randllama.") + v + ".gguf").string());
    const GGUFTensorInfo* t = file->find_tensor("blk.0.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->ne[0], 768);
    const MatrixView w{t->type, t->ne[1], t->ne[0], file->tensor_data(*t)};
    std::vector<uint8_t> scratch;
    std::vector<float> y(static_cast<size_t>(w.rows));
    matvec(w, x.data(), y.data(), scratch);
    expect_close_to_double(w, x.data(), y.data());
    if (std::string(v) != "F32") {  // get_row must agree with the golden dump
      const std::vector<float> want = test::read_f32(test::data_file(
          std::string("golden/quant/randllama.") + v + ".blk.0.ffn_down.weight.f32"));
      std::vector<float> row(768);
      get_row(w, 200, row.data());
      EXPECT_EQ(std::memcmp(row.data(), want.data() + 200 * 768, 768 * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// Several matrices against one input (a layer's q, k and v): the bits of one matmul each,
// whether they share the packed pass (same type, repacked), one quantization of the input (same
// type, row-major: the K-quants, and everything on a CPU without packed layouts) or fall back
// (mixed types).
TEST(Matmul, SharedInputProductsEqualSeparateOnes) {
  const int64_t cols = 256;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16, DType::Q4_K, DType::Q6_K, DType::Q5_0}) {
    for (bool mixed : {false, true}) {
      const int64_t rows[] = {64, 32, 48};
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<MatrixView> ws;
      std::vector<std::unique_ptr<HugeBuffer>> packs;
      for (int i = 0; i < 3; ++i) {
        const DType ti = mixed && i == 1 ? DType::Q4_K : t;
        bytes.push_back(random_matrix(ti, rows[i], cols, 70 + i));
        ws.push_back({ti, rows[i], cols, bytes.back().data()});
        packs.push_back(pack_for_cpu(ws.back()));
      }
      for (int64_t n : {1, 3, 9}) {
        for (bool invariant : {false, true}) {
          const std::vector<float> x = normal_floats(cols * n, 80);
          std::vector<uint8_t> scratch;
          std::vector<std::vector<float>> want(3), got(3);
          std::vector<float*> ys;
          for (int i = 0; i < 3; ++i) {
            want[i].resize(static_cast<size_t>(rows[i] * n));
            got[i].assign(static_cast<size_t>(rows[i] * n), -1.0f);
            matmul(ws[i], x.data(), n, want[i].data(), scratch, invariant);
            ys.push_back(got[i].data());
          }
          matmul_shared(ws, x.data(), n, ys, scratch, invariant);
          for (int i = 0; i < 3; ++i)
            EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0)
                << type_name(t) << (mixed ? " mixed" : "") << " matrix " << i << " tokens " << n;
        }
      }
    }
  }
  std::vector<uint8_t> scratch;
  const MatrixView one[] = {{DType::F32, 2, 2, nullptr}};
  float* outs[] = {nullptr, nullptr};
  EXPECT_THROW(matmul_shared(one, nullptr, 1, outs, scratch), Error);
}

// matmul_each: each matrix on its own input (a token's experts' down projections), in one fork
// where the matrices are repacked alike, with each product's bits as matmul gives them.
TEST(Matmul, EachInputProductsEqualSeparateOnes) {
  const int64_t cols = 256;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16, DType::Q4_K, DType::Q6_K, DType::Q5_0}) {
    for (bool mixed : {false, true}) {
      const int64_t rows[] = {64, 32, 48};
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<MatrixView> ws;
      std::vector<std::unique_ptr<HugeBuffer>> packs;
      for (int i = 0; i < 3; ++i) {
        const DType ti = mixed && i == 1 ? DType::Q4_K : t;
        bytes.push_back(random_matrix(ti, rows[i], cols, 90 + i));
        ws.push_back({ti, rows[i], cols, bytes.back().data()});
        packs.push_back(pack_for_cpu(ws.back()));
      }
      for (int64_t n : {1, 3, 9}) {
        for (bool invariant : {false, true}) {
          std::vector<std::vector<float>> xs, want(3), got(3);
          std::vector<const float*> xp;
          std::vector<float*> ys;
          std::vector<uint8_t> scratch;
          for (int i = 0; i < 3; ++i) {
            xs.push_back(normal_floats(cols * n, 100 + static_cast<uint32_t>(i)));
            xp.push_back(xs.back().data());
            want[i].resize(static_cast<size_t>(rows[i] * n));
            got[i].assign(static_cast<size_t>(rows[i] * n), -1.0f);
            matmul(ws[i], xs[i].data(), n, want[i].data(), scratch, invariant);
            ys.push_back(got[i].data());
          }
          matmul_each(ws, xp, n, ys, scratch, invariant);
          for (int i = 0; i < 3; ++i)
            EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0)
                << type_name(t) << (mixed ? " mixed" : "") << " matrix " << i << " tokens " << n;
        }
      }
    }
  }
  std::vector<uint8_t> scratch;
  const MatrixView one[] = {{DType::F32, 2, 2, nullptr}};
  const float* ins[] = {nullptr};
  float* outs[] = {nullptr, nullptr};
  EXPECT_THROW(matmul_each(one, ins, 1, outs, scratch), Error);
  const float* two_ins[] = {nullptr, nullptr};
  float* one_out[] = {nullptr};
  EXPECT_THROW(matmul_each(one, two_ins, 1, one_out, scratch), Error);
}

}  // namespace
}  // namespace orchard
