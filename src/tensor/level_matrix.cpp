#include "tensor/ggml_rounding.h"  // first: the check below rounds as the dequantizers do

#include "tensor/level_matrix.h"

#include <cmath>

#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"

namespace orchard {

bool level_matrix_fits(int64_t rows, int64_t cols, LevelGroups groups) {
  if (rows <= 0 || cols <= 0 || cols % 16 != 0) return false;
  return groups == LevelGroups::kAlongRows || rows % 16 == 0;
}

void prefetch_levels(const LevelMatrix& m) {
  auto lines = [](const void* p, size_t bytes) {
    const auto* c = static_cast<const char*>(p);
    for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 2);
  };
  const size_t n = static_cast<size_t>(m.rows * m.cols);
  lines(m.q, n);
  lines(m.scale, n / 16 * sizeof(float));
  if (m.offset) lines(m.offset, n / 16 * sizeof(float));
}

void vec_times_levels_reference(const LevelMatrix& m, const float* x, float* y) {
  const int64_t groups = m.cols / 16;
  if (m.groups == LevelGroups::kAlongRows) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const int64_t g = c / 16;
      float acc = 0.0f, off = 0.0f;
      for (int64_t r = 0; r < m.rows; ++r) {
        const float xs = x[r] * m.scale[r * groups + g];
        acc = std::fma(xs, static_cast<float>(m.q[r * m.cols + c]), acc);
      }
      if (m.offset) {
        for (int64_t r = 0; r < m.rows; ++r) off = std::fma(x[r], m.offset[r * groups + g], off);
        acc = acc + off;
      }
      y[c] = acc;
    }
    return;
  }
  for (int64_t c = 0; c < m.cols; ++c) {
    float acc = 0.0f;
    for (int64_t g = 0; g < m.rows / 16; ++g) {
      float part = 0.0f, xsum = 0.0f;
      for (int64_t r = 16 * g; r < 16 * g + 16; ++r) {
        part = std::fma(x[r], static_cast<float>(m.q[r * m.cols + c]), part);
        xsum += x[r];
      }
      acc = std::fma(m.scale[g * m.cols + c], part, acc);
      if (m.offset) acc = std::fma(m.offset[g * m.cols + c], xsum, acc);
    }
    y[c] = acc;
  }
}

void rows_times_levels(const LevelMatrix& m, const float* x, int64_t n, int64_t x_stride, float* y, int64_t y_stride) {
  static const kernels::LevelProductFn simd = kernels::lookup_level_product(kernels::detect_isa());
  if (simd) simd(m, x, n, x_stride, y, y_stride);
  else
    for (int64_t t = 0; t < n; ++t) vec_times_levels_reference(m, x + t * x_stride, y + t * y_stride);
}

void vec_times_levels(const LevelMatrix& m, const float* x, float* y) { rows_times_levels(m, x, 1, 0, y, 0); }

bool levels_from_rows(DType t, const void* data, size_t row_bytes, int64_t rows, int64_t cols, bool transposed,
                      LevelStore& out) {
  const LevelGroups groups = transposed ? LevelGroups::kAlongColumns : LevelGroups::kAlongRows;
  if (transposed ? !level_matrix_fits(cols, rows, groups) : !level_matrix_fits(rows, cols, groups)) return false;
  const int64_t per_row = cols / 16;
  std::vector<int8_t> q(static_cast<size_t>(cols));
  std::vector<float> scale(static_cast<size_t>(per_row)), offset(static_cast<size_t>(per_row)), values(static_cast<size_t>(cols));
  out.q.assign(static_cast<size_t>(rows * cols), 0);
  out.scale.assign(static_cast<size_t>(rows * per_row), 0.0f);
  out.offset.assign(static_cast<size_t>(rows * per_row), 0.0f);
  bool any_offset = false;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* src = static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes;
    if (!row_levels(t, src, q.data(), scale.data(), offset.data(), cols)) return false;
    // The levels must give the dequantizer's values exactly; a format whose arithmetic differs
    // keeps its float copy instead.
    dequantize_row(t, src, values.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const float product = scale[static_cast<size_t>(c / 16)] * static_cast<float>(q[static_cast<size_t>(c)]);
      const float v = product + offset[static_cast<size_t>(c / 16)];
      if (v != values[static_cast<size_t>(c)]) return false;  // (−0 and +0 alike: a level 0 times a negative scale)
    }
    for (int64_t c = 0; c < cols; ++c) {
      // transposed: element (c, r) of a cols × rows matrix; its group is (c/16, r)
      const size_t at = transposed ? static_cast<size_t>(c * rows + r) : static_cast<size_t>(r * cols + c);
      out.q[at] = q[static_cast<size_t>(c)];
    }
    for (int64_t g = 0; g < per_row; ++g) {
      const size_t at = transposed ? static_cast<size_t>(g * rows + r) : static_cast<size_t>(r * per_row + g);
      out.scale[at] = scale[static_cast<size_t>(g)];
      out.offset[at] = offset[static_cast<size_t>(g)];
      any_offset = any_offset || offset[static_cast<size_t>(g)] != 0.0f;
    }
  }
  if (!any_offset) out.offset.clear();
  out.view = LevelMatrix{out.q.data(), out.scale.data(), any_offset ? out.offset.data() : nullptr,
                         transposed ? cols : rows, transposed ? rows : cols, groups};
  return true;
}

}  // namespace orchard
