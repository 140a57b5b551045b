#pragma once
// The one place where weight matrices multiply activations, so faster kernels swap in here.
#include <cstdint>
#include <vector>

#include "tensor/types.h"

namespace orchard {

// A view of a 2-D weight matrix in a file: `rows` rows of `cols` elements, row-major.
struct MatrixView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  // Optional copy of the rows repacked for this CPU's many-token kernel (see pack_for_cpu).
  const uint8_t* packed = nullptr;
};

// Repacks `w` for the fastest prompt-processing kernel of this CPU when there is one and its
// shape fits, pointing w.packed at the returned bytes (keep them alive as long as `w`).
// Returns an empty vector and leaves `w` alone otherwise.
std::vector<uint8_t> pack_for_cpu(MatrixView& w);

// y[r] = sum_c W[r, c] * x[c] for every row r.  `scratch` is reused between calls.
void matvec(const MatrixView& w, const float* x, float* y, std::vector<uint8_t>& scratch);

// Y[t, r] = sum_c W[r, c] * X[t, c] for t in [0, n_tokens): a batch of activations.
// `batch_invariant`: compute each token's row the same way however many tokens share the call,
// so a server batching requests gives each the bits it gets alone. It takes the repacked
// weights (when there are any) for a single token too, and leaves out kernels whose rounding
// depends on the token count.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch, bool batch_invariant = false);

// y[r] = Σ_c w[r·stride + c] · x[c] on the calling thread only (for use inside parallel work,
// e.g. attention scores against the rows of a KV cache).
void dot_rows_f32(const float* w, int64_t rows, int64_t cols, int64_t stride, const float* x, float* y);

// One row of W as floats (embedding lookup).
void get_row(const MatrixView& w, int64_t row, float* out);

}  // namespace orchard
