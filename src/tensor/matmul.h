#pragma once
// The one place where weight matrices multiply activations, so faster kernels swap in here.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tensor/huge_buffer.h"
#include "tensor/types.h"

namespace orchard {

// A view of a 2-D weight matrix in a file: `rows` rows of `cols` elements, row-major.
struct MatrixView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  // Optional copy of the rows repacked for this CPU's kernels (see pack_for_cpu). Where
  // pack_replaces_original(type), matmul reads only it, so `data` may then be null.
  const uint8_t* packed = nullptr;
};

// Repacks `w` into this CPU's faster layout when it has one and the shape fits, pointing
// w.packed at the returned huge-page memory (keep it alive as long as `w`). Returns nullptr
// and leaves `w` alone otherwise.
std::unique_ptr<HugeBuffer> pack_for_cpu(MatrixView& w);
// The bytes pack_into needs for `w`; 0 where this CPU has no packed layout for it.
size_t packed_bytes(const MatrixView& w);
// Repacks `w` into dst (packed_bytes(w) bytes, 64-byte aligned, kept alive as long as `w`) and
// points w.packed at it; false, leaving `w` alone, where packed_bytes(w) is 0. Lets a model put
// all its matrices in one buffer: whole huge pages, where one buffer per matrix left the
// small ones on 4 KiB pages.
bool pack_into(MatrixView& w, uint8_t* dst);
// True where matmul reads a packed matrix of this type for every token count, so the original
// rows are no longer needed once packed.
bool pack_replaces_original(DType type);

// Products of fewer multiply-adds than this, over fewer weight bytes than kSerialMatmulBytes,
// run on the calling thread (a fork/join costs a few µs, about what 100k int8 multiply-adds take
// on one core), so callers may run several such products in parallel jobs of their own. The
// bytes bound splits a float matrix that is small in multiply-adds but slow to stream (a MoE
// router: 64 × 1536 floats, 393 KB).
constexpr int64_t kSerialMatmulMacs = 100'000;
constexpr size_t kSerialMatmulBytes = 128 << 10;
// True where matmul, matmul_shared and matmul_each run a product of `rows` rows (in all) of this
// type and width on the calling thread: callers that put such products in parallel jobs of
// their own ask this, so that a product never forks inside a fork.
bool runs_serially(DType type, int64_t rows, int64_t cols, int64_t n_tokens);

// y[r] = sum_c W[r, c] * x[c] for every row r.  `scratch` is reused between calls.
void matvec(const MatrixView& w, const float* x, float* y, std::vector<uint8_t>& scratch);

// Y[t, r] = sum_c W[r, c] * X[t, c] for t in [0, n_tokens): a batch of activations.
// `batch_invariant`: compute each token's row the same way however many tokens share the call,
// so a server batching requests gives each the bits it gets alone: it leaves out kernels whose
// rounding differs from the one-token kernel's. (Repacked weights are invariant by design.)
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch, bool batch_invariant = false);

// matmul(ws[i], x, n_tokens, ys[i]) for every i, the same bits, in one pass where it can: matrices
// of one type and width, repacked, share one preparation of the activations and one fork
// (q, k and v of a layer; gate and up). Otherwise one matmul after another.
void matmul_shared(std::span<const MatrixView> ws, const float* x, int64_t n_tokens, std::span<float* const> ys,
                   std::vector<uint8_t>& scratch, bool batch_invariant = false);

// matmul(ws[i], xs[i], n_tokens, ys[i]) for every i, the same bits, in one fork where it can:
// repacked matrices of one type and width, each against its own input (a token's chosen experts'
// down projections). Otherwise one matmul after another.
void matmul_each(std::span<const MatrixView> ws, std::span<const float* const> xs, int64_t n_tokens,
                 std::span<float* const> ys, std::vector<uint8_t>& scratch, bool batch_invariant = false);

// matmul for a column slice: W keeps whole quantization blocks around the `width` columns the
// activations cover, which start `offset` columns in (tensor and expert parallel shards), so
// each row of x is placed into zero padding (`padded`, reused) first. Plain matmul when the
// slice is all of W.
void matmul_cols(const MatrixView& w, int64_t offset, const float* x, int64_t width, int64_t n_tokens, float* y,
                 ActivationVector& padded, std::vector<uint8_t>& scratch, bool batch_invariant = false);

// One row of W as floats (embedding lookup).
void get_row(const MatrixView& w, int64_t row, float* out);

}  // namespace orchard
