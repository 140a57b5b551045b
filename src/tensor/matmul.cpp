// Matrix products: activations are converted once per token into the weight's vec_dot_type,
// as ggml does (so logits round like llama.cpp's), then the best GEMM kernel for this CPU runs
// over rows split between the pool's threads; the scalar vec_dot is the fallback.
#include "tensor/matmul.h"

#include <algorithm>
#include <array>
#include <string>

#include "tensor/error.h"
#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "tensor/threadpool.h"

namespace orchard {
namespace {

// From this many tokens a kernel's gemm_many (outer-product panels) beats its dot-product
// tiles; below, converting and transposing each panel costs more than it saves.
constexpr int64_t kManyTokens = 16;

// Checks the view and returns the bytes of one weight row.
size_t checked_row_bytes(const MatrixView& w, const char* what) {
  if (w.rows < 0 || w.cols < 0)
    throw Error(std::string(what) + ": negative matrix shape " + std::to_string(w.rows) + " x " +
                std::to_string(w.cols));
  if ((w.rows > 0 && w.cols > 0) && w.data == nullptr && w.packed == nullptr)
    throw Error(std::string(what) + ": " + type_name(w.type) + " matrix has no data");
  const TypeInfo& info = type_info(w.type);
  if (w.cols % info.block_elems != 0)
    throw Error(std::string(what) + ": " + std::to_string(w.cols) + " columns is not a multiple of the " +
                info.name + " block size " + std::to_string(info.block_elems));
  return row_bytes(w.type, w.cols);
}

// The SIMD kernels for a weight type on this CPU, looked up once per type.
const kernels::Kernels& fast_kernels(DType t) {
  static const auto table = [] {
    std::array<kernels::Kernels, 64> ks{};
    const kernels::Isa isa = kernels::detect_isa();
    for (uint32_t id = 0; id < ks.size(); ++id)
      if (const TypeInfo* info = type_info(id); info && info->computable)
        ks[id] = kernels::lookup(static_cast<DType>(id), isa);
    return ks;
  }();
  static const kernels::Kernels none{};
  const auto id = static_cast<uint32_t>(t);
  return id < table.size() ? table[id] : none;
}

// The packed kernels over the rows of `ws` end to end (one matrix, or several of one type and
// width against the same input, or each against its own: xs holds one input or one per matrix):
// one preparation of each input and one fork; each output row is computed exactly as for its
// matrix alone.
void run_packed(const kernels::PackedKernels& pk, std::span<const MatrixView> ws, std::span<const float* const> xs,
                int64_t n_tokens, std::span<float* const> ys, std::vector<uint8_t>& scratch, ThreadPool& pool,
                bool batch_invariant) {
  const int64_t cols = ws[0].cols, group = pk.row_group;
  int64_t total = 0;
  for (const MatrixView& w : ws) total += w.rows;
  const size_t pb = pk.prep_bytes(cols), per_input = pb * static_cast<size_t>(n_tokens);
  scratch.resize(per_input * xs.size());
  const auto n_inputs = static_cast<int64_t>(xs.size());
  pool.parallel_for(n_tokens * n_inputs, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t i = j / n_tokens, t = j % n_tokens;
      pk.prepare(xs[static_cast<size_t>(i)] + t * cols, cols, scratch.data() + static_cast<size_t>(i) * per_input + static_cast<size_t>(t) * pb);
    }
  });
  const kernels::PackedGemmFn gemm =
      pk.gemm_many && !batch_invariant && n_tokens >= kManyTokens ? pk.gemm_many : pk.gemm;
  const auto rows = [&](int64_t r0, int64_t r1) {
    int64_t first = 0;  // row of the concatenation where matrix i starts
    for (size_t i = 0; i < ws.size() && r0 < r1; first += ws[i].rows, ++i) {
      const int64_t lo = std::max(r0, first), hi = std::min(r1, first + ws[i].rows);
      if (lo >= hi) continue;
      const uint8_t* xp = scratch.data() + (xs.size() == 1 ? 0 : i * per_input);
      gemm(ws[i].packed, ws[i].rows, lo - first, hi - first, xp, pb, n_tokens, cols, ys[i] + (lo - first),
           ws[i].rows);
    }
  };
  // Static where a stolen piece costs more than it saves: slabbed rows (a piece would be one
  // short stream per slab), or a layout whose many-token passes repack every token per piece.
  if ((pk.slab_cols && cols > pk.slab_cols) || (pk.static_split && n_tokens > 1))
    pool.parallel_for(total, group, rows);
  else
    pool.parallel_for_balanced(total, group, rows);
}

// Whether matmul runs these kernels over their own activation layout for this many tokens.
bool uses_prepared_layout(const kernels::Kernels& k, int64_t n_tokens) {
  return k.prepare && (n_tokens == 1 || !k.prepare_one_token_only);
}

// The plain GEMM tiles over several row-major matrices of one type and width against one input
// (a layer's q/k/v or gate/up; a token's chosen experts): the activations are quantized once and
// the rows of all of them split in one fork. Each row is computed exactly as matmul computes
// it. False, doing nothing, where that path is not the one matmul would take.
bool run_quantized_shared(const kernels::Kernels& k, std::span<const MatrixView> ws, const float* x, int64_t n_tokens,
                          std::span<float* const> ys, std::vector<uint8_t>& scratch) {
  if (ws.size() < 2 || !k.gemm || uses_prepared_layout(k, n_tokens)) return false;
  int64_t total = 0;
  for (const MatrixView& w : ws) {
    if (w.type != ws[0].type || w.cols != ws[0].cols || !w.data || (w.packed && k.packed)) return false;
    total += w.rows;
  }
  const int64_t cols = ws[0].cols;
  const DType xt = vec_dot_type(ws[0].type);
  const size_t x_row = row_bytes(xt, cols), w_row = row_bytes(ws[0].type, cols);
  ThreadPool& pool = runs_serially(ws[0].type, total, cols, n_tokens) ? serial_pool() : global_pool();
  scratch.resize(x_row * static_cast<size_t>(n_tokens));
  pool.parallel_for(n_tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      quantize_activations(xt, x + t * cols, scratch.data() + static_cast<size_t>(t) * x_row, cols);
  });
  const int64_t nb = cols / type_info(ws[0].type).block_elems;
  const uint8_t* xq = scratch.data();
  pool.parallel_for(total, 16, [&](int64_t r0, int64_t r1) {
    int64_t first = 0;  // row of the concatenation where matrix i starts
    for (size_t i = 0; i < ws.size() && r0 < r1; first += ws[i].rows, ++i) {
      const int64_t lo = std::max(r0, first), hi = std::min(r1, first + ws[i].rows);
      if (lo >= hi) continue;
      const auto* wbytes = static_cast<const uint8_t*>(ws[i].data) + static_cast<size_t>(lo - first) * w_row;
      k.gemm(wbytes, w_row, hi - lo, xq, x_row, n_tokens, nb, ys[i] + (lo - first), ws[i].rows);
    }
  });
  return true;
}

}  // namespace

bool runs_serially(DType type, int64_t rows, int64_t cols, int64_t n_tokens) {
  return rows * cols * n_tokens < kSerialMatmulMacs && row_bytes(type, cols) * static_cast<size_t>(rows) < kSerialMatmulBytes;
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch, bool batch_invariant) {
  const size_t w_row = checked_row_bytes(w, "matmul");
  if (n_tokens < 0) throw Error("matmul: negative token count " + std::to_string(n_tokens));
  if (n_tokens == 0 || w.rows == 0) return;
  const kernels::Kernels& k = fast_kernels(w.type);
  // Small products (a tiny model's one token) finish before a fork/join would: keep them on
  // the calling thread. Rows are independent, so the split never changes the result.
  ThreadPool& pool = runs_serially(w.type, w.rows, w.cols, n_tokens) ? serial_pool() : global_pool();
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  // Weights repacked at load: always for many tokens; for one token where that layout is the
  // faster one too (then it is the only copy kept), or where bits must not depend on the batch.
  if (w.packed && k.packed && (n_tokens > 1 || batch_invariant || k.packed->one_token || !w.data)) {
    float* const ys[] = {y};
    const float* const xs[] = {x};
    run_packed(*k.packed, {&w, 1}, xs, n_tokens, ys, scratch, pool, batch_invariant);
    return;
  }
  if (uses_prepared_layout(k, n_tokens)) {  // kernels with their own activation layout
    const size_t pb = k.prep_bytes(w.cols);
    scratch.resize(pb * static_cast<size_t>(n_tokens));
    uint8_t* xp = scratch.data();
    if (n_tokens == 1) {
      k.prepare(x, w.cols, xp);
      const kernels::GemvFn gemv = k.gemv_fast && !batch_invariant ? k.gemv_fast : k.gemv;
      pool.parallel_for_balanced(w.rows, 16, [&](int64_t r0, int64_t r1) {
        gemv(wbytes + static_cast<size_t>(r0) * w_row, w_row, r1 - r0, xp, w.cols, y + r0);
      });
      return;
    }
    pool.parallel_for(n_tokens, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) k.prepare(x + t * w.cols, w.cols, xp + static_cast<size_t>(t) * pb);
    });
    const bool many = k.gemm_many && !batch_invariant && n_tokens >= kManyTokens;
    const kernels::GemmFn gemm = many ? k.gemm_many : k.gemm_prepared;
    pool.parallel_for(w.rows, many ? 32 : 16, [&](int64_t r0, int64_t r1) {
      gemm(wbytes + static_cast<size_t>(r0) * w_row, w_row, r1 - r0, xp, pb, n_tokens, w.cols, y + r0, w.rows);
    });
    return;
  }
  const DType xt = vec_dot_type(w.type);
  const size_t x_row = row_bytes(xt, w.cols);
  scratch.resize(x_row * static_cast<size_t>(n_tokens));
  pool.parallel_for(n_tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      quantize_activations(xt, x + t * w.cols, scratch.data() + static_cast<size_t>(t) * x_row, w.cols);
  });

  const int64_t nb = w.cols / type_info(w.type).block_elems;
  const uint8_t* xq = scratch.data();
  // Threads split the weight rows, so each row streams from memory once, by one thread; the
  // grain keeps row tiles of 4 whole and chunks big enough to amortise the fork.
  if (const kernels::GemmFn gemm = k.gemm) {
    pool.parallel_for(w.rows, 16, [&](int64_t r0, int64_t r1) {
      gemm(wbytes + static_cast<size_t>(r0) * w_row, w_row, r1 - r0, xq, x_row, n_tokens, nb, y + r0, w.rows);
    });
    return;
  }
  const detail::VecDotFn dot = detail::find_vec_dot(w.type);
  pool.parallel_for(w.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = wbytes + static_cast<size_t>(r) * w_row;
      for (int64_t t = 0; t < n_tokens; ++t)
        y[t * w.rows + r] = dot(wr, xq + static_cast<size_t>(t) * x_row, nb);
    }
  });
}

void matmul_cols(const MatrixView& w, int64_t offset, const float* x, int64_t width, int64_t n_tokens, float* y,
                 ActivationVector& padded, std::vector<uint8_t>& scratch, bool batch_invariant) {
  if (offset == 0 && width == w.cols) {
    matmul(w, x, n_tokens, y, scratch, batch_invariant);
    return;
  }
  padded.assign(static_cast<size_t>(n_tokens * w.cols), 0.0f);
  for (int64_t t = 0; t < n_tokens; ++t)
    std::copy_n(x + t * width, width, &padded[static_cast<size_t>(t * w.cols + offset)]);
  matmul(w, padded.data(), n_tokens, y, scratch, batch_invariant);
}

namespace {

// Checks matmul_shared / matmul_each's arguments; true where ws can go through run_packed together
// (one type and width, all repacked, the packed path being the one matmul takes). `total`: their rows.
bool packed_together(const char* what, const kernels::Kernels& k, std::span<const MatrixView> ws, size_t n_ys,
                     int64_t n_tokens, bool batch_invariant, int64_t& total) {
  if (ws.size() != n_ys)
    throw Error(std::string(what) + ": " + std::to_string(ws.size()) + " matrices but " + std::to_string(n_ys) + " outputs");
  if (n_tokens < 0) throw Error(std::string(what) + ": negative token count " + std::to_string(n_tokens));
  total = 0;
  bool together = k.packed != nullptr;
  for (const MatrixView& w : ws) {
    checked_row_bytes(w, what);
    together = together && w.type == ws[0].type && w.cols == ws[0].cols && w.packed &&
               (n_tokens > 1 || batch_invariant || k.packed->one_token || !w.data);
    total += w.rows;
  }
  return together;
}

}  // namespace

void matmul_shared(std::span<const MatrixView> ws, const float* x, int64_t n_tokens, std::span<float* const> ys,
                   std::vector<uint8_t>& scratch, bool batch_invariant) {
  if (ws.empty() && ys.empty()) return;
  const kernels::Kernels& k = fast_kernels(ws.empty() ? DType::F32 : ws[0].type);
  int64_t total = 0;
  const bool together = packed_together("matmul_shared", k, ws, ys.size(), n_tokens, batch_invariant, total);
  if (ws.empty() || n_tokens == 0) return;
  if (!together) {
    if (run_quantized_shared(k, ws, x, n_tokens, ys, scratch)) return;
    for (size_t i = 0; i < ws.size(); ++i) matmul(ws[i], x, n_tokens, ys[i], scratch, batch_invariant);
    return;
  }
  ThreadPool& pool = runs_serially(ws[0].type, total, ws[0].cols, n_tokens) ? serial_pool() : global_pool();
  const float* const xs[] = {x};
  run_packed(*k.packed, ws, xs, n_tokens, ys, scratch, pool, batch_invariant);
}

void matmul_each(std::span<const MatrixView> ws, std::span<const float* const> xs, int64_t n_tokens,
                 std::span<float* const> ys, std::vector<uint8_t>& scratch, bool batch_invariant) {
  if (xs.size() != ws.size())
    throw Error("matmul_each: " + std::to_string(ws.size()) + " matrices but " + std::to_string(xs.size()) + " inputs");
  if (ws.empty() && ys.empty()) return;
  const kernels::Kernels& k = fast_kernels(ws.empty() ? DType::F32 : ws[0].type);
  int64_t total = 0;
  const bool together = packed_together("matmul_each", k, ws, ys.size(), n_tokens, batch_invariant, total);
  if (ws.empty() || n_tokens == 0) return;
  if (!together || ws.size() == 1) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(ws[i], xs[i], n_tokens, ys[i], scratch, batch_invariant);
    return;
  }
  ThreadPool& pool = runs_serially(ws[0].type, total, ws[0].cols, n_tokens) ? serial_pool() : global_pool();
  run_packed(*k.packed, ws, xs, n_tokens, ys, scratch, pool, batch_invariant);
}

size_t packed_bytes(const MatrixView& w) {
  const kernels::Kernels& k = fast_kernels(w.type);
  if (!k.packed || w.rows % k.packed->row_group != 0 || w.rows == 0 || w.data == nullptr ||
      w.cols <= k.packed->min_cols)
    return 0;
  checked_row_bytes(w, "pack_for_cpu");
  return k.packed->pack_bytes(w.rows, w.cols);
}

bool pack_into(MatrixView& w, uint8_t* dst) {
  if (packed_bytes(w) == 0) return false;
  const kernels::PackedKernels& pk = *fast_kernels(w.type).packed;
  const size_t w_row = row_bytes(w.type, w.cols);
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  global_pool().parallel_for(w.rows, pk.row_group,
                             [&](int64_t r0, int64_t r1) { pk.pack(wbytes, w_row, w.rows, r0, r1, w.cols, dst); });
  w.packed = dst;
  return true;
}

std::unique_ptr<HugeBuffer> pack_for_cpu(MatrixView& w) {
  const size_t bytes = packed_bytes(w);
  if (bytes == 0) return nullptr;
  auto out = std::make_unique<HugeBuffer>(bytes);
  pack_into(w, out->data());
  return out;
}

bool pack_replaces_original(DType type) {
  const kernels::Kernels& k = fast_kernels(type);
  return k.packed && k.packed->one_token;
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
