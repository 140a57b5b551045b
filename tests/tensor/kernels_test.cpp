// Every SIMD GEMM kernel against the scalar reference dot product, on shapes that exercise the
// row and token tiles and their remainders.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "platform/platform.h"
#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/simd_isas.h"
#include "tensor/types.h"

namespace orchard {
namespace {

using kernels::Isa;

using test::simd_isas;

// K-quants have no quantizer here: their blocks get random bits with sane fp16 scales, which
// exercises every bit of the packing just as well.
void fill_weights(DType wt, std::vector<uint8_t>& w, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const TypeInfo& info = type_info(wt);
  if (wt == DType::Q4_K || wt == DType::Q5_K || wt == DType::Q6_K) {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t d_at = wt == DType::Q6_K ? 208 : 0;
    for (size_t b = 0; b < w.size(); b += info.block_bytes) {
      const uint16_t d = fp32_to_fp16(0.01f * (1.0f + std::fabs(nd(rng))));
      std::memcpy(&w[b + d_at], &d, 2);
      if (wt != DType::Q6_K) {
        const uint16_t dmin = fp32_to_fp16(0.005f * std::fabs(nd(rng)));
        std::memcpy(&w[b + 2], &dmin, 2);
      }
    }
    return;
  }
  std::vector<float> tmp(static_cast<size_t>(n));
  for (auto& v : tmp) v = nd(rng);
  quantize_row(wt, tmp.data(), w.data(), n);
}

// ntok random tokens of `cols` activations, each prepared by `prepare` (prep_bytes(cols) apart,
// in `prepared`) and quantized the standard way to `xt` (row_bytes(xt, cols) apart, in `ref`).
struct Tokens {
  std::vector<uint8_t> prepared, ref;
  size_t pb, xrb;
};
Tokens prepare_tokens(kernels::PrepareFn prepare, kernels::PrepBytesFn prep_bytes, DType xt, int64_t cols,
                      int64_t ntok, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tokens out{{}, {}, prep_bytes(cols), row_bytes(xt, cols)};
  out.prepared.resize(out.pb * ntok);
  out.ref.resize(out.xrb * ntok);
  std::vector<float> x(cols);
  for (int64_t t = 0; t < ntok; ++t) {
    for (auto& v : x) v = nd(rng);
    prepare(x.data(), cols, out.prepared.data() + t * out.pb);
    quantize_activations(xt, x.data(), out.ref.data() + t * out.xrb, cols);
  }
  return out;
}

void check_gemm(DType wt, kernels::GemmFn gemm, const char* name, int64_t rows, int64_t ntok, int64_t cols) {
  std::mt19937 rng(static_cast<uint32_t>(rows * 131 + ntok * 7 + cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const DType xt = vec_dot_type(wt);
  const size_t wrb = row_bytes(wt, cols), xrb = row_bytes(xt, cols);
  std::vector<uint8_t> w(wrb * rows), x(xrb * ntok);
  std::vector<float> tmp(cols);
  fill_weights(wt, w, rows * cols, rng);
  for (int64_t t = 0; t < ntok; ++t) {
    for (auto& v : tmp) v = nd(rng);
    quantize_activations(xt, tmp.data(), x.data() + t * xrb, cols);
  }
  const int64_t nb = cols / type_info(wt).block_elems;
  const int64_t ldy = rows + 3;  // a stride wider than the rows catches indexing slips
  std::vector<float> y(ldy * ntok, -12345.0f);
  gemm(w.data(), wrb, rows, x.data(), xrb, ntok, nb, y.data(), ldy);
  for (int64_t t = 0; t < ntok; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float ref = vec_dot(wt, w.data() + r * wrb, x.data() + t * xrb, cols);
      const float tol = 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref));
      ASSERT_NEAR(y[t * ldy + r], ref, tol) << type_name(wt) << " " << name
                                            << " rows " << rows << " ntok " << ntok << " cols "
                                            << cols << " at r " << r << " t " << t;
    }
  for (int64_t t = 0; t < ntok; ++t)
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[t * ldy + r], -12345.0f) << "wrote outside the rows";
}

void check(DType wt, Isa isa, int64_t rows, int64_t ntok, int64_t cols) {
  const kernels::Kernels k = kernels::lookup(wt, isa);
  if (k.gemm) check_gemm(wt, k.gemm, kernels::isa_name(isa), rows, ntok, cols);
}

TEST(Kernels, SimdGemmMatchesScalarReference) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  for (Isa isa : isas)
    for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                     DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K})
      for (int64_t rows : {1, 3, 4, 9})
        for (int64_t ntok : {1, 2, 4, 7, 70})
          for (int64_t cols : {256, 512}) check(wt, isa, rows, ntok, cols);
}

#if defined(__aarch64__)
// Every build of the NEON integer tiles: for the build's target, for SDOT and for SDOT + SMMLA
// (chosen at run time where the CPU reports them: qemu's default CPU does, so all run here).
// SMMLA's 4 × 4 prompt tiles must give every token the bits a lone token gets.
TEST(Kernels, NeonIntegerTilesMatchScalarReferenceWithAndWithoutSdot) {
  const bool sdot = platform::arm_features().dotprod, mmla = platform::arm_features().i8mm;
  for (DType wt : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t rows : {1, 4, 9})
      for (int64_t ntok : {1, 4, 7})
        for (int64_t cols : {256, 512}) {
          check_gemm(wt, kernels::neon_quant_gemm(wt), "neon (build target)", rows, ntok, cols);
          if (sdot) check_gemm(wt, kernels::neon_quant_gemm_dotprod(wt), "neon + sdot", rows, ntok, cols);
          if (sdot && mmla) check_gemm(wt, kernels::neon_quant_gemm_i8mm(wt), "neon + smmla", rows, ntok, cols);
        }
  // A token's bits do not depend on its batch: 8 tokens at once (two 4 × 4 SMMLA tiles per row
  // group) against each token alone, for every build of the tiles present.
  for (DType wt : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) {
    std::vector<kernels::GemmFn> fns = {kernels::neon_quant_gemm(wt)};
    if (sdot) fns.push_back(kernels::neon_quant_gemm_dotprod(wt));
    if (sdot && mmla) fns.push_back(kernels::neon_quant_gemm_i8mm(wt));
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t rows = 8, ntok = 8, cols = 256, nb = cols / 32;
    const size_t wrb = row_bytes(wt, cols), xrb = row_bytes(DType::Q8_0, cols);
    std::vector<uint8_t> w(wrb * rows), x(xrb * ntok);
    fill_weights(wt, w, rows * cols, rng);
    std::vector<float> tmp(cols);
    for (int64_t t = 0; t < ntok; ++t) {
      for (auto& v : tmp) v = nd(rng);
      quantize_activations(DType::Q8_0, tmp.data(), x.data() + t * xrb, cols);
    }
    for (kernels::GemmFn gemm : fns) {
      std::vector<float> all(rows * ntok), one(rows);
      gemm(w.data(), wrb, rows, x.data(), xrb, ntok, nb, all.data(), rows);
      for (int64_t t = 0; t < ntok; ++t) {
        gemm(w.data(), wrb, rows, x.data() + t * xrb, xrb, 1, nb, one.data(), rows);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(all[t * rows + r], one[r]) << type_name(wt) << " token " << t << " row " << r;
      }
    }
  }
  if (!sdot) GTEST_SKIP() << "this CPU has no SDOT: only the build target's tiles were checked";
}
#endif

// Each ISA's file keeps its own tiles: the same tile name in two files compiled for different
// targets must not become one symbol at link time (it did: the AVX-512 table pointed at the
// AVX2 gemm for every format both files had, because GCC gave those instantiations weak linkage).
TEST(Kernels, EachIsaFileKeepsItsOwnTiles) {
#if defined(__x86_64__)
  // lookup_avx512 itself runs AVX-512 instructions.
  if (kernels::detect_isa() != Isa::Avx512) GTEST_SKIP() << "needs an AVX-512 CPU";
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                   DType::Q5_K, DType::Q6_K})
    EXPECT_NE(reinterpret_cast<void*>(kernels::lookup_avx2(wt).gemm),
              reinterpret_cast<void*>(kernels::lookup_avx512(wt).gemm))
        << type_name(wt);
#elif defined(__aarch64__)
  for (DType wt : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    EXPECT_NE(kernels::neon_quant_gemm(wt), kernels::neon_quant_gemm_dotprod(wt)) << type_name(wt);
    EXPECT_NE(kernels::neon_quant_gemm_dotprod(wt), kernels::neon_quant_gemm_i8mm(wt)) << type_name(wt);
  }
#else
  GTEST_SKIP() << "no SIMD kernel files on this architecture";
#endif
}

// The formats of the files people download (Q4_K_M mixes Q4_K, Q6_K and Q5_0; Q5_K_M adds Q5_K)
// never fall back to the scalar reference on an ISA this CPU has, NEON included.
TEST(Kernels, EveryCommonFormatHasASimdKernelOnEveryIsa) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  for (Isa isa : isas)
    for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K})
      EXPECT_NE(kernels::lookup(wt, isa).gemm, nullptr) << type_name(wt) << " on " << kernels::isa_name(isa);
}

// Every SIMD ISA repacks the formats of the files people download (NEON's Macs too). A layout on
// one x86 ISA serves the other as well: an AVX-512 CPU runs the K-quants' AVX2 repacked rows
// (their AVX-512 row-major tiles were ~0.6x as fast for moe-small Q4_K_M).
TEST(Kernels, EverySimdIsaRepacksQ4_0Q8_0F16Q4_KAndQ6_K) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  for (Isa isa : simd_isas())
    for (DType wt : {DType::Q4_0, DType::Q8_0, DType::F16, DType::Q4_K, DType::Q6_K})
      EXPECT_NE(kernels::lookup(wt, isa).packed, nullptr) << type_name(wt) << " on " << kernels::isa_name(isa);
}

// The kernels with their own activation layout (one token and tiles of tokens), against the
// scalar reference on the activations quantized the standard way.
TEST(Kernels, PreparedLayoutKernelsMatchScalarReference) {
  for (Isa isa : simd_isas())
    for (DType wt : {DType::Q4_0, DType::Q8_0, DType::F16})
      for (int64_t cols : {32, 40, 64, 96, 2048}) {
        const kernels::Kernels k = kernels::lookup(wt, isa);
        if (!k.prepare || (cols % 32 != 0 && wt != DType::F16)) continue;  // 40: F16's scalar tail
        std::mt19937 rng(static_cast<uint32_t>(cols));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        const int64_t rows = 7;
        const size_t wrb = row_bytes(wt, cols);
        std::vector<uint8_t> w(wrb * rows);
        fill_weights(wt, w, rows * cols, rng);
        std::vector<float> x(cols);
        for (auto& v : x) v = nd(rng);
        std::vector<uint8_t> prepared(k.prep_bytes(cols)), xq(row_bytes(vec_dot_type(wt), cols));
        k.prepare(x.data(), cols, prepared.data());
        quantize_activations(vec_dot_type(wt), x.data(), xq.data(), cols);
        std::vector<float> y(rows);
        k.gemv(w.data(), wrb, rows, prepared.data(), cols, y.data());
        std::vector<float> yf(rows);
        if (k.gemv_fast) k.gemv_fast(w.data(), wrb, rows, prepared.data(), cols, yf.data());
        for (int64_t r = 0; r < rows; ++r) {
          const float ref = vec_dot(wt, w.data() + r * wrb, xq.data(), cols);
          ASSERT_NEAR(y[r], ref, 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref)))
              << type_name(wt) << " " << kernels::isa_name(isa) << " cols " << cols << " row " << r;
          if (k.gemv_fast) {
            ASSERT_NEAR(yf[r], ref, 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref)))
                << "gemv_fast " << type_name(wt) << " cols " << cols << " row " << r;
          }
        }
        // Many tokens: token t is x scaled by (t + 1), so each column of the result differs.
        for (int64_t ntok : {2, 3, 5, 9}) {
          const size_t pb = k.prep_bytes(cols), xrb = row_bytes(vec_dot_type(wt), cols);
          std::vector<uint8_t> xs(pb * ntok), xqs(xrb * ntok);
          std::vector<float> xt(cols);
          for (int64_t t = 0; t < ntok; ++t) {
            for (int64_t i = 0; i < cols; ++i) xt[i] = x[i] * static_cast<float>(t + 1) + 0.01f * t;
            k.prepare(xt.data(), cols, xs.data() + t * pb);
            quantize_activations(vec_dot_type(wt), xt.data(), xqs.data() + t * xrb, cols);
          }
          std::vector<float> ym(rows * ntok);
          k.gemm_prepared(w.data(), wrb, rows, xs.data(), pb, ntok, cols, ym.data(), rows);
          for (int64_t t = 0; t < ntok; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              const float ref = vec_dot(wt, w.data() + r * wrb, xqs.data() + t * xrb, cols);
              ASSERT_NEAR(ym[t * rows + r], ref, 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref)))
                  << "gemm_prepared " << type_name(wt) << " cols " << cols << " ntok " << ntok << " t " << t << " r " << r;
            }
        }
      }
}

// gemm_many (outer-product panels for prompts) on shapes around its panel (32 rows × 256
// columns) and token tile (12), against the reference; and its one claim about rounding: a
// token's outputs are the same bits whatever the token count or the rows given to a call.
TEST(Kernels, ManyTokenKernelsMatchScalarReference) {
  for (Isa isa : simd_isas()) {
    const kernels::Kernels k = kernels::lookup(DType::F16, isa);
    if (isa == Isa::Avx512) {
      ASSERT_TRUE(k.gemm_many) << "AVX-512 has a many-token F16 kernel";
    }
    if (!k.gemm_many) continue;
    for (int64_t cols : {1, 17, 256, 257, 600})
      for (int64_t rows : {1, 16, 31, 33, 70}) {
        const int64_t ntok = 13 + rows % 19;  // a whole token tile and a remainder
        std::mt19937 rng(static_cast<uint32_t>(cols * 97 + rows));
        const size_t wrb = row_bytes(DType::F16, cols);
        std::vector<uint8_t> w(wrb * rows);
        fill_weights(DType::F16, w, rows * cols, rng);
        const Tokens x = prepare_tokens(k.prepare, k.prep_bytes, DType::F16, cols, ntok, rng);
        const size_t pb = x.pb, xrb = x.xrb;
        const std::vector<uint8_t>&xp = x.prepared, &xq = x.ref;
        const int64_t ldy = rows + 3;
        std::vector<float> y(ldy * ntok, -12345.0f);
        k.gemm_many(w.data(), wrb, rows, xp.data(), pb, ntok, cols, y.data(), ldy);
        for (int64_t t = 0; t < ntok; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const float ref = vec_dot(DType::F16, w.data() + r * wrb, xq.data() + t * xrb, cols);
            ASSERT_NEAR(y[t * ldy + r], ref, 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref)))
                << kernels::isa_name(isa) << " rows " << rows << " cols " << cols << " t " << t << " r " << r;
          }
          for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[t * ldy + r], -12345.0f) << "wrote outside the rows";
        }
        // The last token alone, and the rows split in two calls at a panel-unaligned row.
        const int64_t last = ntok - 1, split = rows / 2;
        std::vector<float> alone(rows);
        k.gemm_many(w.data(), wrb, split, xp.data() + last * pb, pb, 1, cols, alone.data(), rows);
        k.gemm_many(w.data() + split * wrb, wrb, rows - split, xp.data() + last * pb, pb, 1, cols,
                    alone.data() + split, rows);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(alone[r], y[last * ldy + r]) << "rows " << rows << " cols " << cols << " r " << r;
      }
  }
}

TEST(Kernels, FloatKernelsHandleRowTails) {
  for (Isa isa : simd_isas())
    for (DType wt : {DType::F32, DType::F16, DType::BF16}) check(wt, isa, 5, 5, 37);
}

TEST(Kernels, DetectsAnIsaAndNamesIt) {
  const char* name = kernels::isa_name(kernels::detect_isa());
  EXPECT_TRUE(std::string(name) == "scalar" || std::string(name) == "avx2" ||
              std::string(name) == "avx512" || std::string(name) == "neon");
}

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// The Q4_0 prepared layout must hold exactly quantize_activations' Q8_0 (ggml's x86 rounding:
// 127/amax, halves to even), the many exact halves below included.
TEST(Kernels, PreparedQ4_0ActivationsAreTheReferenceQuantization) {
  const kernels::Kernels k = kernels::lookup(DType::Q4_0, kernels::detect_isa());
  if (!k.prepare || kernels::detect_isa() != kernels::Isa::Avx512) GTEST_SKIP() << "no prepared Q4_0 kernel here";
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i % 9) - 4.5f;  // many exact halves
  x[5] = 127.0f;                                                        // d = 1 in block A
  x[40] = -63.5f;                                                       // d = 0.5 in block B
  std::vector<uint8_t> prep(k.prep_bytes(64));
  k.prepare(x.data(), 64, prep.data());
  std::vector<uint8_t> ref(2 * 34);
  quantize_activations(DType::Q8_0, x.data(), ref.data(), 64);
  const auto* a = reinterpret_cast<const int8_t*>(ref.data() + 2);
  const auto* b = reinterpret_cast<const int8_t*>(ref.data() + 34 + 2);
  const auto* q = reinterpret_cast<const int8_t*>(prep.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(q[i], a[i]) << i;
    EXPECT_EQ(q[16 + i], b[i]) << i;
    EXPECT_EQ(q[32 + i], a[16 + i]) << i;
    EXPECT_EQ(q[48 + i], b[16 + i]) << i;
  }
  float d[2];
  std::memcpy(d, prep.data() + 128, sizeof d);
  uint16_t da, db;
  std::memcpy(&da, ref.data(), 2);
  std::memcpy(&db, ref.data() + 34, 2);
  EXPECT_EQ(d[0], fp16_to_fp32(da));
  EXPECT_EQ(d[1], fp16_to_fp32(db));
}

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// Weights repacked at load (row groups in SIMD lanes) against the scalar reference.
TEST(Kernels, PackedWeightKernelsMatchScalarReference) {
  for (Isa isa : simd_isas())
  for (DType wt : {DType::Q4_0, DType::Q8_0, DType::F16, DType::Q4_K, DType::Q6_K}) {
    const kernels::Kernels k = kernels::lookup(wt, isa);
    if (!k.packed) continue;
    SCOPED_TRACE(kernels::isa_name(isa));
    const kernels::PackedKernels& pk = *k.packed;
    // 4192 columns: two whole slabs and a short one, where slab_cols is 2048; F16's 256-column
    // blocks, 16 whole and a short one. The K-quants' blocks are 256 wide.
    for (int64_t cols : {32, 96, 256, 768, 2048, 4192})
      for (int64_t ntok : {1, 2, 3, 4, 6, 9, 13}) {
        if (cols % type_info(wt).block_elems != 0) continue;
        std::mt19937 rng(static_cast<uint32_t>(cols + ntok));
        const int64_t rows = 3 * pk.row_group;
        const size_t wrb = row_bytes(wt, cols);
        std::vector<uint8_t> w(wrb * rows);
        fill_weights(wt, w, rows * cols, rng);
        // The quantizer never writes −128, but a file may hold it: Q8_0's packing flips sign
        // bits, so both ends of the byte range must come out right.
        if (wt == DType::Q8_0)
          for (size_t b = 0; b < w.size(); b += 34) {
            w[b + 2 + b % 32] = 0x80;
            w[b + 3 + b % 29] = 0x7F;
          }
        std::vector<uint8_t> packed(pk.pack_bytes(rows, cols));
        // Packed in two calls and multiplied in two, as threads share the rows.
        pk.pack(w.data(), wrb, rows, 0, pk.row_group, cols, packed.data());
        pk.pack(w.data(), wrb, rows, pk.row_group, rows, cols, packed.data());
        const Tokens x = prepare_tokens(pk.prepare, pk.prep_bytes, vec_dot_type(wt), cols, ntok, rng);
        const size_t pb = x.pb, xrb = x.xrb;
        const std::vector<uint8_t>&xp = x.prepared, &xq = x.ref;
        const int64_t ldy = rows + 5;
        std::vector<float> y(ldy * ntok, -1e9f);
        const int64_t split = 2 * pk.row_group;
        // The batch-invariant kernel, then the many-token one where the layout has it.
        for (const kernels::PackedGemmFn gemm : {pk.gemm, pk.gemm_many}) {
          if (!gemm) continue;
          std::fill(y.begin(), y.end(), -1e9f);
          gemm(packed.data(), rows, 0, split, xp.data(), pb, ntok, cols, y.data(), ldy);
          gemm(packed.data(), rows, split, rows, xp.data(), pb, ntok, cols, y.data() + split, ldy);
          for (int64_t t = 0; t < ntok; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              const float ref = vec_dot(wt, w.data() + r * wrb, xq.data() + t * xrb, cols);
              ASSERT_NEAR(y[t * ldy + r], ref, 1e-4f * std::sqrt(static_cast<float>(cols)) * (1.0f + std::fabs(ref)))
                  << type_name(wt) << (gemm == pk.gemm ? "" : " many") << " cols " << cols << " ntok " << ntok
                  << " t " << t << " r " << r;
            }
        }
      }
  }
}

// The K-quants' prompt tiles keep one exact integer per row and super-block, so AVX-512's VNNI
// tiles (vpdpbusd, six tokens a pass) and AVX2's (int16 pairs, three or four) give the same bits.
TEST(Kernels, KQuantPromptTilesGiveTheSameBitsOnEveryX86Isa) {
  std::vector<Isa> x86;
  for (Isa isa : simd_isas())
    if (isa == Isa::Avx2 || isa == Isa::Avx512) x86.push_back(isa);
  if (x86.size() < 2) GTEST_SKIP() << "needs both AVX2 and AVX-512 on this CPU";
  for (DType wt : {DType::Q4_K, DType::Q6_K})
    for (int64_t ntok : {1, 5, 6, 7, 13, 64}) {
      const int64_t cols = 768, rows = 16;
      std::mt19937 rng(static_cast<uint32_t>(ntok));
      const size_t wrb = row_bytes(wt, cols);
      std::vector<uint8_t> w(wrb * rows);
      fill_weights(wt, w, rows * cols, rng);
      std::vector<std::vector<float>> ys;
      for (Isa isa : x86) {
        const kernels::PackedKernels& pk = *kernels::lookup(wt, isa).packed;
        ASSERT_TRUE(pk.gemm_many) << type_name(wt) << " on " << kernels::isa_name(isa);
        std::vector<uint8_t> packed(pk.pack_bytes(rows, cols));
        pk.pack(w.data(), wrb, rows, 0, rows, cols, packed.data());
        std::mt19937 xr(7);
        const Tokens x = prepare_tokens(pk.prepare, pk.prep_bytes, vec_dot_type(wt), cols, ntok, xr);
        std::vector<float> y(rows * ntok);
        pk.gemm_many(packed.data(), rows, 0, rows, x.prepared.data(), x.pb, ntok, cols, y.data(), rows);
        ys.push_back(std::move(y));
      }
      for (size_t i = 0; i < ys[0].size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(ys[0][i]), std::bit_cast<uint32_t>(ys[1][i]))
            << type_name(wt) << " ntok " << ntok << " at " << i << ": " << ys[0][i] << " vs " << ys[1][i];
    }
}

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// Q8_0 products for generation and batch-invariant callers round as ggml's x86 dot product
// (ggml_vec_dot_q8_0_q8_0 on AVX2, and llamafile's tinyBLAS the same way): per block, lane g's
// integer sum of elements 4g..4g+3, converted to float, FMA'd with dw·dx into lane g's chain;
// at the end ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Golden mixtures of Q8_0
// experts route on near-ties that another order flips. Bit for bit, on every x86 ISA here.
float ggml_q8_0_dot(const uint8_t* w, const uint8_t* x, int64_t nb) {
  float lane[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const auto* wb = w + 34 * b;
    const auto* xb = x + 34 * b;
    uint16_t hw, hx;
    std::memcpy(&hw, wb, 2);
    std::memcpy(&hx, xb, 2);
    const float d = fp16_to_fp32(hw) * fp16_to_fp32(hx);
    for (int g = 0; g < 8; ++g) {
      int32_t s = 0;
      for (int k = 4 * g; k < 4 * g + 4; ++k) s += static_cast<int8_t>(wb[2 + k]) * static_cast<int8_t>(xb[2 + k]);
      lane[g] = std::fma(d, static_cast<float>(s), lane[g]);
    }
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

TEST(Kernels, Q8_0GenerationRoundsAsGgmlsX86DotProduct) {
  int checked = 0;
  for (kernels::Isa isa : {kernels::Isa::Avx2, kernels::Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(kernels::detect_isa()) || kernels::detect_isa() == kernels::Isa::Neon)
      continue;
    const kernels::Kernels k = kernels::lookup(DType::Q8_0, isa);
    if (!k.packed) continue;
    const int64_t rows = 32, cols = 4096, nb = cols / 32;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(rows * cols), xf(2 * cols);
    for (float& v : wf) v = nd(rng);
    for (float& v : xf) v = nd(rng) * 3.0f;
    const size_t rb = row_bytes(DType::Q8_0, cols);
    std::vector<uint8_t> w(rb * rows), xq(2 * rb);
    for (int64_t r = 0; r < rows; ++r) quantize_row(DType::Q8_0, &wf[r * cols], w.data() + r * rb, cols);
    for (int t = 0; t < 2; ++t) quantize_activations(DType::Q8_0, &xf[t * cols], xq.data() + t * rb, cols);
    std::vector<uint8_t> packed(k.packed->pack_bytes(rows, cols)), prep(2 * k.packed->prep_bytes(cols));
    k.packed->pack(w.data(), rb, rows, 0, rows, cols, packed.data());
    for (int t = 0; t < 2; ++t) k.packed->prepare(&xf[t * cols], cols, prep.data() + t * k.packed->prep_bytes(cols));
    for (int ntok : {1, 2}) {
      std::vector<float> y(rows * ntok);
      k.packed->gemm(packed.data(), rows, 0, rows, prep.data(), k.packed->prep_bytes(cols), ntok, cols, y.data(), rows);
      for (int t = 0; t < ntok; ++t)
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(y[t * rows + r], ggml_q8_0_dot(w.data() + r * rb, xq.data() + t * rb, nb))
              << kernels::isa_name(isa) << " token " << t << " of " << ntok << " row " << r;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no packed Q8_0 kernel on " << kernels::isa_name(kernels::detect_isa());
}

// The Q4_0/Q8_0 packed layouts prepare each token as int8 q[32], float d, int32 c per block (and
// AVX-512's Q8_0 then each 4-element chunk's c): q and d must be exactly quantize_activations'
// Q8_0 (halves to even), c the format's offset times Σq.
TEST(Kernels, PackedActivationsAreTheReferenceQuantization) {
  bool any = false;
  for (DType wt : {DType::Q4_0, DType::Q8_0}) {
    const kernels::Kernels k = kernels::lookup(wt, kernels::detect_isa());
    if (!k.packed) continue;
    any = true;
    std::vector<float> x(96);
    for (int i = 0; i < 96; ++i) x[i] = static_cast<float>(i % 9) - 4.5f;  // many exact halves
    x[5] = 127.0f;    // d = 1 in block 0
    x[40] = -63.5f;   // d = 0.5 in block 1
    for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // d = 0 in block 2
    // Q4_0's nibbles are offset by 8; AVX-512's Q8_0 flips the weights' sign bits (offset 128),
    // AVX2's keeps them signed (no offset).
    const bool avx512 = kernels::detect_isa() == kernels::Isa::Avx512;
    const int32_t offset = wt == DType::Q4_0 ? -8 : avx512 ? -128 : 0;
    const bool chunks = wt == DType::Q8_0 && avx512;
    const size_t xb = chunks ? 72 : 40;
    ASSERT_EQ(k.packed->prep_bytes(96), 3u * xb);
    std::vector<uint8_t> prep(k.packed->prep_bytes(96));
    k.packed->prepare(x.data(), 96, prep.data());
    std::vector<uint8_t> ref(3 * 34);
    quantize_activations(DType::Q8_0, x.data(), ref.data(), 96);
    for (int b = 0; b < 3; ++b) {
      const auto* want = reinterpret_cast<const int8_t*>(ref.data() + 34 * b + 2);
      const uint8_t* blk = prep.data() + xb * b;
      const auto* got = reinterpret_cast<const int8_t*>(blk);
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(got[i], want[i]) << type_name(wt) << " block " << b << " element " << i;
        sum += want[i];
      }
      float d;
      int32_t c;
      uint16_t dh;
      std::memcpy(&d, blk + 32, 4);
      std::memcpy(&c, blk + 36, 4);
      std::memcpy(&dh, ref.data() + 34 * b, 2);
      EXPECT_EQ(d, fp16_to_fp32(dh)) << type_name(wt) << " block " << b;
      EXPECT_EQ(c, offset * sum) << type_name(wt) << " block " << b;
      for (int g = 0; chunks && g < 8; ++g) {
        int32_t cg;
        std::memcpy(&cg, blk + 40 + 4 * g, 4);
        EXPECT_EQ(cg, offset * (want[4 * g] + want[4 * g + 1] + want[4 * g + 2] + want[4 * g + 3])) << "chunk " << g;
      }
    }
  }
  if (!any) GTEST_SKIP() << "no packed Q4_0/Q8_0 kernels on " << kernels::isa_name(kernels::detect_isa());
}

}  // namespace
}  // namespace orchard

namespace orchard {
namespace {

// NEON's repacked Q4_0/Q8_0 rows (4 rows in lanes) end each block the way its row-major tiles
// do — the block's exact integer sum, one fused multiply-add — so a row gets the same bits from
// either layout, whatever the token count (and SMMLA's prompt tiles round as the row-major ones).
TEST(Kernels, NeonPackedRowsGiveTheRowMajorTilesBits) {
  if (kernels::detect_isa() != Isa::Neon) GTEST_SKIP() << "needs NEON";
  for (DType wt : {DType::Q4_0, DType::Q8_0}) {
    const kernels::Kernels k = kernels::lookup(wt, Isa::Neon);
    ASSERT_NE(k.packed, nullptr) << type_name(wt);
    const kernels::PackedKernels& pk = *k.packed;
    for (int64_t cols : {32, 256, 4096})
      for (int64_t ntok : {1, 3, 4, 6}) {
        std::mt19937 rng(static_cast<uint32_t>(cols * 3 + ntok));
        const int64_t rows = 3 * pk.row_group;
        const size_t wrb = row_bytes(wt, cols);
        std::vector<uint8_t> w(wrb * rows), packed(pk.pack_bytes(rows, cols));
        fill_weights(wt, w, rows * cols, rng);
        pk.pack(w.data(), wrb, rows, 0, rows, cols, packed.data());
        const Tokens x = prepare_tokens(pk.prepare, pk.prep_bytes, DType::Q8_0, cols, ntok, rng);
        std::vector<float> rowwise(rows * ntok), grouped(rows * ntok, -1.0f);
        k.gemm(w.data(), wrb, rows, x.ref.data(), x.xrb, ntok, cols / 32, rowwise.data(), rows);
        pk.gemm(packed.data(), rows, 0, rows, x.prepared.data(), x.pb, ntok, cols, grouped.data(), rows);
        for (size_t i = 0; i < rowwise.size(); ++i)
          ASSERT_EQ(grouped[i], rowwise[i]) << type_name(wt) << " cols " << cols << " ntok " << ntok << " element " << i;
      }
  }
}

}  // namespace
}  // namespace orchard
