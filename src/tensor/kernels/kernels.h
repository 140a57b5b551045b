#pragma once
// SIMD kernels behind matmul, chosen once at run time from the CPU's features.
//
// A GEMM kernel computes y[t·ldy + r] = W[r] · X[t] for rows r < nrows of W and activation rows
// t < ntok. W rows lie `wrb` bytes apart in the weight's format; X rows lie `xrb` bytes apart,
// already converted to vec_dot_type(W); `nb` is the number of blocks in a row. ntok == 1 is the
// matrix-vector product of token generation; larger ntok is prompt processing, where kernels
// tile rows × tokens so each weight block is unpacked once for several tokens.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/attention.h"
#include "tensor/latent_attention_kernels.h"
#include "tensor/level_matrix.h"
#include "tensor/types.h"

namespace orchard::kernels {

// How far ahead (bytes) the one-token kernels request the weights they stream: a row or so, past
// what this CPU's hardware prefetcher keeps in flight for one stream per core.
constexpr size_t kStreamAhead = 4096;

using GemmFn = void (*)(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* x, size_t xrb,
                        int64_t ntok, int64_t nb, float* y, int64_t ldy);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t nb);

// Kernels that read activations in a layout of their own: `prepare` writes one token's
// activations (quantized exactly as vec_dot_type(W) would be) into `prep_bytes(n)` bytes;
// `gemv` multiplies one prepared token, `gemm_prepared` several prepared tokens whose rows lie
// prep_bytes(n) apart (GemmFn's xrb), with `nb` = the element count n.
using PrepBytesFn = size_t (*)(int64_t n);
using PrepareFn = void (*)(const float* x, int64_t n, uint8_t* out);
using GemvFn = void (*)(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n,
                        float* y);

// Kernels over weights repacked once at load. A matrix of `rows` rows (a multiple of
// `row_group`) packs into pack_bytes(rows, cols) bytes at `out`; `pack` fills in rows [r0, r1)
// of it (whole groups) from the original rows at `w` (row 0 of the matrix), so threads can
// share the work. `gemm` computes rows [r0, r1) (whole groups) of the packed matrix at `w` for
// ntok tokens prepared by `prepare` (xrb = prep_bytes(n) apart), n elements per row, writing
// y[t·ldy + r − r0]. Rows longer than `slab_cols` elements are packed slab after slab (see
// avx512_packed.cpp): a thread's rows are then one stream per slab, so split them into few
// ranges, not many small pieces.
using PackBytesFn = size_t (*)(int64_t rows, int64_t cols);
using PackFn = void (*)(const uint8_t* w, size_t wrb, int64_t rows, int64_t r0, int64_t r1, int64_t cols,
                        uint8_t* out);
using PackedGemmFn = void (*)(const uint8_t* w, int64_t rows, int64_t r0, int64_t r1, const uint8_t* x, size_t xrb,
                              int64_t ntok, int64_t n, float* y, int64_t ldy);
struct PackedKernels {
  int64_t row_group;
  int64_t slab_cols;
  PackBytesFn pack_bytes;
  PackFn pack;
  PrepBytesFn prep_bytes;
  PrepareFn prepare;
  // Computes every token the same way whatever ntok, so a token's bits never depend on its batch.
  PackedGemmFn gemm;
  // True where the packed layout is also the faster one for a single token (measured for Q4_0
  // and Q8_0, whose 16-row groups stream as one sequence with no horizontal sums, and for F16
  // in 32-row panels), so matmul uses it for every token count and the original rows can be
  // given back.
  bool one_token;
  // Only matrices of more columns than this are packed (the layout pays only there); 0: all.
  int64_t min_cols = 0;
  // Optional, faster for many tokens, but its rounding depends on nothing the batch-invariant
  // callers can rely on (see Kernels::gemm_many): matmul leaves it out for them.
  PackedGemmFn gemm_many = nullptr;
  // Many tokens split the rows statically: a piece taken by another thread would repack every
  // token's activations for itself (measured slower for F16 prompts at every piece size).
  bool static_split = false;
};

struct Kernels {
  GemmFn gemm = nullptr;            // nullptr: use the scalar reference
  PrepBytesFn prep_bytes = nullptr;  // the rest: optional, all set or all null
  PrepareFn prepare = nullptr;
  GemvFn gemv = nullptr;
  GemmFn gemm_prepared = nullptr;
  const PackedKernels* packed = nullptr;  // optional repacked-weight path for many tokens
  // Optional, over prepared activations like gemm_prepared but faster for many tokens. Its
  // rounding differs from gemv's (not from itself at other token counts), so callers that need
  // a token's bits not to depend on the batch leave it out.
  GemmFn gemm_many = nullptr;
  // Optional, like gemv but faster; its rounding differs from gemm_prepared's, so it is left
  // out with gemm_many where a token's bits must not depend on the batch.
  GemvFn gemv_fast = nullptr;
  // The prepared layout serves one token only; many tokens take `gemm` over activations
  // quantized the standard way (AVX2 F16: its prompt tiles over prepared floats measured 0.6-0.7x
  // of the fp16 tiles, while one token gains 1.4-1.6x from the prepared kernel).
  bool prepare_one_token_only = false;
};

enum class Isa { Scalar, Avx2, Avx512, Neon };
const char* isa_name(Isa isa);
// The best ISA this CPU supports (ORCHARD_ISA=scalar|avx2|avx512|neon overrides, for tests and
// benchmarks; an override the CPU lacks is ignored).
Isa detect_isa();
// Kernels for weights of type `w` on `isa`; fields are nullptr where that ISA has none.
Kernels lookup(DType w, Isa isa);

// Per-ISA tables (each file compiles only where its ISA exists; see dispatch.cpp).
Kernels lookup_avx2(DType w);
Kernels lookup_avx512(DType w);
Kernels lookup_neon(DType w);
// Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K (neon_quant_tiles.h): for the build's target, for SDOT
// (call only where platform::arm_features().dotprod) and for SDOT + SMMLA (.dotprod and .i8mm).
GemmFn neon_quant_gemm(DType w);
GemmFn neon_quant_gemm_dotprod(DType w);
GemmFn neon_quant_gemm_i8mm(DType w);
// Adds the prepared-layout kernels of avx512_q4_0.cpp to `k`.
void add_avx512_prepared(DType w, Kernels& k);
void add_avx512_prepared_q8_0(Kernels& k);  // avx512_q8_0.cpp
const PackedKernels* avx512_packed(DType w);
const PackedKernels* avx2_packed(DType w);    // avx2_packed.cpp: Q4_0, Q8_0 (F16: avx2_f16_packed)
const PackedKernels* avx2_f16_packed();       // avx2_f16_packed.cpp
const PackedKernels* neon_f16_packed();       // neon_f16_packed.cpp
// neon_packed_rows.h, neon_packed_k.h: Q4_0, Q8_0, Q4_K, Q6_K for the build's target and for
// SDOT (where .dotprod).
const PackedKernels* neon_packed(DType w);
const PackedKernels* neon_packed_dotprod(DType w);
// F16 on AVX2, shared between its files: activations prepared as f32 values rounded through fp16.
size_t avx2_f16_prep_bytes(int64_t n);
void avx2_f16_prepare(const float* x, int64_t n, uint8_t* out);
const PackedKernels* avx2_packed_k(DType w);    // avx2_packed_k.cpp: Q4_K, Q6_K
const PackedKernels* avx512_packed_k(DType w);  // avx512_packed_k.cpp: the same with VNNI
// Causal attention for one KV head (tensor/attention.h); heads a multiple of 16 wide.
using AttendFn = void (*)(const AttendArgs& a);
AttendFn lookup_attend(Isa isa);  // nullptr where `isa` has none
AttendFn avx512_attend();
AttendFn avx2_attend();
AttendFn neon_attend();
// y_t = x_t·M for n rows (x_stride, y_stride apart) over integer levels (tensor/level_matrix.h,
// level_tiles.h); nullptr where `isa` has none.
using LevelProductFn = void (*)(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y,
                                int64_t y_stride);
LevelProductFn lookup_level_product(Isa isa);
LevelProductFn avx512_level_product();  // avx512_latent.cpp
LevelProductFn avx2_level_product();    // avx2_attention.cpp
LevelProductFn neon_level_product();    // neon_attention.cpp
// Latent attention's passes over the latent cache (tensor/latent_attention_kernels.h,
// latent_tiles.h); nullptr where `isa` has none.
struct LatentFns {
  void (*scores)(const LatentScoresArgs& a);
  void (*mix)(const LatentMixArgs& a);
};
const LatentFns* lookup_latent(Isa isa);
const LatentFns* avx512_latent();  // avx512_latent.cpp
const LatentFns* avx2_latent();    // avx2_attention.cpp
const LatentFns* neon_latent();    // neon_attention.cpp
// out = silu(gate) ⊙ up over n floats (tensor/ops.h's swiglu); nullptr where `isa` has none.
using SwigluFn = void (*)(const float* gate, const float* up, float* out, int64_t n);
SwigluFn lookup_swiglu(Isa isa);
SwigluFn avx512_swiglu();
SwigluFn avx2_swiglu();  // avx2_elementwise.cpp
SwigluFn neon_swiglu();  // neon_elementwise.cpp
// rope_rotate (tensor/ops.h) of one head's first pairs, as many as fill whole registers;
// returns how many it rotated (rope_rotate does the rest). nullptr where `isa` has none.
using RopeFn = int64_t (*)(float* head, int64_t n_rot, const float* cs, bool neox);
RopeFn lookup_rope(Isa isa);
RopeFn avx512_rope();
RopeFn avx2_rope();
RopeFn neon_rope();

// Floats to IEEE halves (rounded to nearest even) and back, n at a time: tensor/f16.h's
// conversions, the same bits, for the KV cache. nullptr where `isa` has none.
struct HalfFns {
  void (*to_half)(const float* x, uint16_t* out, int64_t n);
  void (*to_float)(const uint16_t* h, float* out, int64_t n);
};
const HalfFns* lookup_half(Isa isa);
const HalfFns* avx512_half();
const HalfFns* avx2_half();  // avx2.cpp (F16C)
const HalfFns* neon_half();

// Adds the many-token kernel of avx512_f16_panels.cpp to `k` where there is one.
void add_avx512_many(DType w, Kernels& k);
// F16 on AVX-512, shared between its files: activations prepared as f32 values rounded through
// fp16 (avx512.cpp); the layout of 32-row panels repacked at load (avx512_f16_packed.cpp).
size_t avx512_f16_prep_bytes(int64_t n);
void avx512_f16_prepare(const float* x, int64_t n, uint8_t* out);
const PackedKernels* avx512_f16_packed();

}  // namespace orchard::kernels
