#include "model/blocks/moe_ffn.h"

#include <algorithm>
#include <cmath>

#include "tensor/ops.h"

namespace orchard {

void dense_ffn(const FfnWeights& w, const float* x, int64_t n, float* out, ActivationVector& gate, ActivationVector& up,
               std::vector<uint8_t>& scratch, bool batch_invariant) {
  const int64_t ffn = w.gate.rows;
  gate.resize(static_cast<size_t>(n * ffn));
  up.resize(static_cast<size_t>(n * ffn));
  const MatrixView ws[] = {w.gate, w.up};
  float* const ys[] = {gate.data(), up.data()};
  matmul_shared(ws, x, n, ys, scratch, batch_invariant);
  swiglu(gate.data(), up.data(), gate.data(), n * ffn);
  // (up is free again: the padding of a column slice of down, tensor or expert parallel)
  matmul_cols(w.down, w.down_offset, gate.data(), ffn, n, out, up, scratch, batch_invariant);
}

// A decoding step: every chosen expert held here takes the same input, so their gate and up
// matrices go through one matmul_shared (one preparation of x, one fork), and their down
// matrices, each on its own expert's activations, through one matmul_each (one fork). The shared
// expert joins both when its matrices are of the routed ones' types and widths (into shared_);
// true when it did.
bool MoeFfn::one_token(const MoeWeights& w, const float* x, int64_t dim, int64_t e0, int64_t e1,
                       std::vector<uint8_t>& scratch, bool batch_invariant) {
  std::vector<MatrixView> ws;
  std::vector<int64_t> slots;
  for (size_t s = 0; s < experts_.size(); ++s)
    if (experts_[s] >= e0 && experts_[s] < e1) {
      const auto local = static_cast<size_t>(experts_[s] - e0);
      ws.push_back(w.gate[local]);
      ws.push_back(w.up[local]);
      slots.push_back(static_cast<int64_t>(s));
    }
  if (slots.empty()) return false;
  const int64_t ffn = ws[0].rows;
  const FfnWeights& sh = w.shared;
  const MatrixView& down0 = w.down[static_cast<size_t>(experts_[static_cast<size_t>(slots[0])] - e0)];
  // A tensor-parallel slice of down may start inside a quantization block: its activations then
  // go in zero padding of down's width (as matmul_cols does).
  const int64_t width = down0.cols;
  const bool padded = w.down_offset != 0 || width != ffn;
  const bool with_shared = (sh.gate.data || sh.gate.packed) && sh.down_offset == w.down_offset &&
                           sh.gate.type == ws[0].type && sh.up.type == ws[1].type && sh.gate.cols == ws[0].cols &&
                           sh.down.type == down0.type && sh.down.cols == width && sh.gate.rows == ffn;
  if (with_shared) {
    ws.push_back(sh.gate);
    ws.push_back(sh.up);
  }
  gate_.resize(static_cast<size_t>(2 * ffn) * (slots.size() + (with_shared ? 1 : 0)));
  std::vector<float*> ys;
  for (size_t i = 0; i < ws.size(); ++i) ys.push_back(&gate_[i * static_cast<size_t>(ffn)]);
  matmul_shared(ws, x, 1, ys, scratch, batch_invariant);
  std::vector<MatrixView> downs;
  std::vector<const float*> xs;
  std::vector<float*> outs;
  if (padded) padded_.assign(static_cast<size_t>(width) * (ws.size() / 2), 0.0f);
  for (size_t i = 0; i < ws.size() / 2; ++i) {
    float* g = ys[2 * i];
    swiglu(g, ys[2 * i + 1], g, ffn);
    if (padded) {
      float* p = &padded_[i * static_cast<size_t>(width)];
      std::copy_n(g, ffn, p + w.down_offset);
      g = p;
    }
    xs.push_back(g);
    if (i < slots.size()) {
      downs.push_back(w.down[static_cast<size_t>(experts_[static_cast<size_t>(slots[i])] - e0)]);
      outs.push_back(&slots_[static_cast<size_t>(slots[i] * dim)]);
    } else {
      shared_.resize(static_cast<size_t>(dim));
      downs.push_back(sh.down);
      outs.push_back(shared_.data());
    }
  }
  matmul_each(downs, xs, 1, outs, scratch, batch_invariant);
  return with_shared;
}

void MoeFfn::forward(const MoeWeights& w, const RouterConfig& c, const float* xn, int64_t n, int64_t dim, float* out,
                     std::vector<uint8_t>& scratch, bool batch_invariant) {
  const int64_t k = c.n_used, n_exp = c.n_expert;
  // l = router · x, then each token's experts and weights
  logits_.resize(static_cast<size_t>(n * n_exp));
  matmul(w.router, xn, n, logits_.data(), scratch, batch_invariant);
  experts_.resize(static_cast<size_t>(n * k));
  weights_.resize(static_cast<size_t>(n * k));
  for (int64_t t = 0; t < n; ++t)
    route_token(c, &logits_[static_cast<size_t>(t * n_exp)], w.selection_bias, &experts_[static_cast<size_t>(t * k)],
                &weights_[static_cast<size_t>(t * k)], route_scratch_);

  // Group the (token, slot) entries by expert (a counting sort keeps tokens in order).
  first_of_.assign(static_cast<size_t>(n_exp + 1), 0);
  for (int32_t e : experts_) ++first_of_[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < n_exp; ++e) first_of_[static_cast<size_t>(e + 1)] += first_of_[static_cast<size_t>(e)];
  rows_of_.resize(experts_.size());
  {
    std::vector<int64_t> next(first_of_.begin(), first_of_.end() - 1);
    for (size_t i = 0; i < experts_.size(); ++i) rows_of_[static_cast<size_t>(next[static_cast<size_t>(experts_[i])]++)] = static_cast<int64_t>(i);
  }

  // y_slot = expert(x_t) for every entry of an expert held here, one batched product per expert
  slots_.resize(static_cast<size_t>(n * k * dim));
  const int64_t e0 = w.first_expert, e1 = e0 + static_cast<int64_t>(w.gate.size());
  const bool shared_done = n == 1 && one_token(w, xn, dim, e0, e1, scratch, batch_invariant);
  for (int64_t e = e0; e < e1 && n > 1; ++e) {
    const int64_t begin = first_of_[static_cast<size_t>(e)], m = first_of_[static_cast<size_t>(e + 1)] - begin;
    if (m == 0) continue;
    x_.resize(static_cast<size_t>(m * dim));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = rows_of_[static_cast<size_t>(begin + i)] / k;
      std::copy_n(xn + t * dim, dim, &x_[static_cast<size_t>(i * dim)]);
    }
    y_.resize(static_cast<size_t>(m * dim));
    const auto local = static_cast<size_t>(e - e0);
    const FfnWeights expert{w.gate[local], w.up[local], w.down[local], w.down_offset};
    dense_ffn(expert, x_.data(), m, y_.data(), gate_, up_, scratch, batch_invariant);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(&y_[static_cast<size_t>(i * dim)], dim, &slots_[static_cast<size_t>(rows_of_[static_cast<size_t>(begin + i)] * dim)]);
  }

  // out_t = Σ_k w_tk · y_tk, in routing order (over the experts held here)
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * dim;
    bool first = true;
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = experts_[static_cast<size_t>(t * k + s)];
      if (e < e0 || e >= e1) continue;
      const float wk = weights_[static_cast<size_t>(t * k + s)];
      const float* y = &slots_[static_cast<size_t>((t * k + s) * dim)];
      if (first)
        for (int64_t i = 0; i < dim; ++i) o[i] = wk * y[i];
      else
        for (int64_t i = 0; i < dim; ++i) o[i] += wk * y[i];
      first = false;
    }
    if (first) std::fill_n(o, dim, 0.0f);
  }

  if (!w.shared.gate.data && !w.shared.gate.packed) return;
  // + g_t · shared(x_t)
  if (!shared_done) {
    shared_.resize(static_cast<size_t>(n * dim));
    dense_ffn(w.shared, xn, n, shared_.data(), gate_, up_, scratch, batch_invariant);
  }
  std::vector<float> g(static_cast<size_t>(n), 1.0f);
  if (w.shared_gate.data || w.shared_gate.packed) {
    matmul(w.shared_gate, xn, n, g.data(), scratch, batch_invariant);
    for (float& v : g) v = 1.0f / (1.0f + std::exp(-v));
  }
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < dim; ++i) out[t * dim + i] += g[static_cast<size_t>(t)] * shared_[static_cast<size_t>(t * dim + i)];
}

}  // namespace orchard
