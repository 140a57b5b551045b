// Matrix-vector products on the scalar vec_dot kernels.  Activations are converted once per
// token into the weight's vec_dot_type, as ggml does, so our logits round like llama.cpp's.
#include "tensor/matmul.h"

#include <string>

#include "tensor/error.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace orchard {
namespace {

// Checks the view and returns the bytes of one weight row.
size_t checked_row_bytes(const MatrixView& w, const char* what) {
  if (w.rows < 0 || w.cols < 0)
    throw Error(std::string(what) + ": negative matrix shape " + std::to_string(w.rows) + " x " +
                std::to_string(w.cols));
  if ((w.rows > 0 && w.cols > 0) && w.data == nullptr)
    throw Error(std::string(what) + ": " + type_name(w.type) + " matrix has no data");
  const TypeInfo& info = type_info(w.type);
  if (w.cols % info.block_elems != 0)
    throw Error(std::string(what) + ": " + std::to_string(w.cols) + " columns is not a multiple of the " +
                info.name + " block size " + std::to_string(info.block_elems));
  return row_bytes(w.type, w.cols);
}

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch) {
  const size_t w_row = checked_row_bytes(w, "matmul");
  if (n_tokens < 0) throw Error("matmul: negative token count " + std::to_string(n_tokens));
  const DType xt = vec_dot_type(w.type);
  const size_t x_row = row_bytes(xt, w.cols);
  scratch.resize(x_row * static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t)
    quantize_row(xt, x + t * w.cols, scratch.data() + static_cast<size_t>(t) * x_row, w.cols);

  const detail::VecDotFn dot = detail::find_vec_dot(w.type);
  const int64_t nb = w.cols / type_info(w.type).block_elems;
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  // Weight rows outermost: each row is read from memory once for the whole batch.
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* wr = wbytes + static_cast<size_t>(r) * w_row;
    for (int64_t t = 0; t < n_tokens; ++t)
      y[t * w.rows + r] = dot(wr, scratch.data() + static_cast<size_t>(t) * x_row, nb);
  }
}

void matvec(const MatrixView& w, const float* x, float* y, std::vector<uint8_t>& scratch) {
  matmul(w, x, 1, y, scratch);
}

void get_row(const MatrixView& w, int64_t row, float* out) {
  const size_t w_row = checked_row_bytes(w, "get_row");
  if (row < 0 || row >= w.rows)
    throw Error("get_row: row " + std::to_string(row) + " is outside a matrix of " +
                std::to_string(w.rows) + " rows");
  dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row) * w_row, out,
                 w.cols);
}

}  // namespace orchard
