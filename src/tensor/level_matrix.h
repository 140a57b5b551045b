#pragma once
// A quantized matrix kept as one int8 level per element with a float scale and offset per 16
// elements (quant.h's row_levels), multiplied by float vectors: y = x·M.
//
// Latent attention's absorbed projections need it. Their products run the other way round from
// the file's rows (a query is moved into the latent space through the transpose of attn_kv_b's
// key rows), so the formats' own kernels, which quantize the activations along a row, do not
// fit; kept as floats instead they were 25 MB a token for moe-small (a tenth of its decoding
// step), levels are a quarter of that with the same values. Each product is float arithmetic
// on those exact values — x·scale rounded, then one fused multiply-add per level, in row order
// — so every ISA's kernel gives the same bits as the scalar reference, whatever else it
// computes beside.
#include <cstdint>
#include <vector>

#include "tensor/types.h"

namespace orchard {

// Which 16 elements share a scale and an offset.
enum class LevelGroups : uint8_t {
  kAlongRows,     // 16 consecutive elements of a row: entry r·(cols/16) + c/16
  kAlongColumns,  // 16 consecutive elements of a column: entry (r/16)·cols + c
};

struct LevelMatrix {
  const int8_t* q = nullptr;        // rows × cols, row-major
  const float* scale = nullptr;     // rows·cols/16, laid out as `groups` says
  const float* offset = nullptr;    // the same, or nullptr where every offset is 0
  int64_t rows = 0, cols = 0;
  LevelGroups groups = LevelGroups::kAlongRows;
};

// y[c] = Σ_r x[r]·(scale·q[r][c] + offset) for c < cols. With groups along rows, per element:
//   acc = fma(fl(x[r]·scale[r][g]), q[r][c], acc) for r = 0, 1, …; y = acc + Σ_r fma(x[r], offset[r][g])
// With groups along columns, per element and group G of 16 rows:
//   part = fma(x[r], q[r][c], part) over r in G (from 0); acc = fma(scale[G][c], part, acc);
//   acc = fma(offset[G][c], Σ_{r∈G} x[r], acc)
// Needs cols a multiple of 16 (and rows of 16 for column groups): level_matrix_fits.
void vec_times_levels(const LevelMatrix& m, const float* x, float* y);
void vec_times_levels_reference(const LevelMatrix& m, const float* x, float* y);  // scalar, same bits
// The same for n rows x_t (x_stride apart) into y_t (y_stride apart), each row the same bits as
// vec_times_levels gives it alone; the kernels widen each level once for several rows.
void rows_times_levels(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y, int64_t y_stride);
bool level_matrix_fits(int64_t rows, int64_t cols, LevelGroups groups);
// Asks for m's bytes to be brought towards this core's L2, to be read soon: a product of a
// matrix that no cache holds otherwise waits on memory latency row by row (a 16 KiB product of
// moe-small ran at ~5 GB/s from memory, four times its time from L3).
void prefetch_levels(const LevelMatrix& m);

// Storage for one matrix built from rows of a quantized format; the view points into it.
struct LevelStore {
  std::vector<int8_t> q;
  std::vector<float> scale, offset;
  LevelMatrix view;
  size_t bytes() const { return q.size() + (scale.size() + offset.size()) * sizeof(float); }
};

// The `rows` rows of type t at `data` (row_bytes apart, `cols` elements each) as levels, with
// groups along rows; transposed: their transpose (cols × rows), groups then along columns.
// False where the format has no levels form or the shape does not fit.
bool levels_from_rows(DType t, const void* data, size_t row_bytes, int64_t rows, int64_t cols, bool transposed,
                      LevelStore& out);

}  // namespace orchard
