#include "model/llama.h"

#include <algorithm>
#include <cmath>

#include "model/gguf.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/threadpool.h"

namespace orchard {

LlamaModel::LlamaModel(const GGUFFile& file, bool repack)
    : hp_(HParams::from_gguf(file)), w_(ModelWeights::bind(file, hp_)) {
  if (repack) w_.pack_for_cpu();
}

void LlamaModel::forward(std::span<const int32_t> tokens, KVCache& kv, std::vector<float>& logits,
                         bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("forward: no tokens to process");
  kv.reserve(n);
  for (int32_t t : tokens)
    if (t < 0 || t >= hp_.n_vocab)
      throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(hp_.n_vocab) + ")");

  const int64_t dim = hp_.dim, qd = hp_.q_dim(), kvd = hp_.kv_dim(), ffn = hp_.ffn_dim;
  const int64_t hd = hp_.head_dim, pos0 = kv.size();
  const bool neox = hp_.rope_order == RopeOrder::NeoX;
  // Activations live in buffers kept across calls: fresh ones every call cost page faults.
  Buffers& b = buf_;
  for (auto* vec : {&b.x, &b.xn, &b.proj}) vec->resize(static_cast<size_t>(n * dim));
  for (auto* vec : {&b.q, &b.att}) vec->resize(static_cast<size_t>(n * qd));
  for (auto* vec : {&b.k, &b.v}) vec->resize(static_cast<size_t>(n * kvd));
  for (auto* vec : {&b.gate, &b.up}) vec->resize(static_cast<size_t>(n * ffn));
  std::vector<float> &x = b.x, &xn = b.xn, &q = b.q, &k = b.k, &v = b.v, &att = b.att, &proj = b.proj,
                     &gate = b.gate, &up = b.up;

  // x = embedding rows of the tokens
  for (int64_t t = 0; t < n; ++t) get_row(w_.tok_embd, tokens[t], &x[t * dim]);

  for (int64_t l = 0; l < hp_.n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];

    // xn = rmsnorm(x) · attn_norm
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.attn_norm, &xn[t * dim], dim, hp_.rms_eps);

    // q = Wq·xn (+bq), k = Wk·xn (+bk), v = Wv·xn (+bv)
    matmul(L.wq, xn.data(), n, q.data(), scratch_);
    matmul(L.wk, xn.data(), n, k.data(), scratch_);
    matmul(L.wv, xn.data(), n, v.data(), scratch_);
    if (L.bq) {
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < qd; ++i) q[t * qd + i] += L.bq[i];
        for (int64_t i = 0; i < kvd; ++i) k[t * kvd + i] += L.bk[i], v[t * kvd + i] += L.bv[i];
      }
    }

    for (int64_t t = 0; t < n; ++t) {
      // qwen3: q_h = rmsnorm(q_h) · q_norm, k_h = rmsnorm(k_h) · k_norm, per head
      if (L.q_norm) {
        for (int64_t h = 0; h < hp_.n_heads; ++h) rms_norm(&q[t * qd + h * hd], L.q_norm, &q[t * qd + h * hd], hd, hp_.rms_eps);
        for (int64_t h = 0; h < hp_.n_kv_heads; ++h) rms_norm(&k[t * kvd + h * hd], L.k_norm, &k[t * kvd + h * hd], hd, hp_.rms_eps);
      }
      // q_h, k_h = rope(q_h, pos), rope(k_h, pos)
      const int64_t pos = pos0 + t;
      for (int64_t h = 0; h < hp_.n_heads; ++h)
        rope(&q[t * qd + h * hd], hp_.n_rot, pos, hp_.rope_base, hp_.rope_freq_scale, w_.rope_freqs, neox);
      for (int64_t h = 0; h < hp_.n_kv_heads; ++h)
        rope(&k[t * kvd + h * hd], hp_.n_rot, pos, hp_.rope_base, hp_.rope_freq_scale, w_.rope_freqs, neox);
      std::copy_n(&k[t * kvd], kvd, kv.k(l, pos));
      std::copy_n(&v[t * kvd], kvd, kv.v(l, pos));
    }

    // att = softmax(q·Kᵀ / √head_dim + causal mask) · V, per head (GQA: heads share KV heads)
    attention(l, q.data(), n, pos0, kv, att.data());

    // x = x + Wo·att
    matmul(L.wo, att.data(), n, proj.data(), scratch_);
    for (int64_t i = 0; i < n * dim; ++i) x[i] += proj[i];

    // x = x + W_down·(silu(W_gate·xn) ⊙ W_up·xn), xn = rmsnorm(x) · ffn_norm
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.ffn_norm, &xn[t * dim], dim, hp_.rms_eps);
    matmul(L.w_gate, xn.data(), n, gate.data(), scratch_);
    matmul(L.w_up, xn.data(), n, up.data(), scratch_);
    swiglu(gate.data(), up.data(), gate.data(), n * ffn);
    matmul(L.w_down, gate.data(), n, proj.data(), scratch_);
    for (int64_t i = 0; i < n * dim; ++i) x[i] += proj[i];
  }
  kv.advance(n);

  // logits = W_out · rmsnorm(x) · output_norm, for every token or only the last
  const int64_t first = all_logits ? 0 : n - 1, rows = n - first;
  for (int64_t t = first; t < n; ++t)
    rms_norm(&x[t * dim], w_.output_norm, &xn[(t - first) * dim], dim, hp_.rms_eps);
  logits.resize(static_cast<size_t>(rows * hp_.n_vocab));
  matmul(w_.output, xn.data(), rows, logits.data(), scratch_);
}

void LlamaModel::attention(int64_t layer, const float* q, int64_t n, int64_t pos0, KVCache& kv,
                           float* out) {
  const int64_t hd = hp_.head_dim, qd = hp_.q_dim(), group = hp_.n_heads / hp_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Every (token, head) pair is independent: threads take contiguous runs of them.
  global_pool().parallel_for(n * hp_.n_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(pos0 + n));
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / hp_.n_heads, h = job % hp_.n_heads;
      const int64_t len = pos0 + t + 1;  // causal: this token sees itself and everything before
      const float* qh = q + t * qd + h * hd;
      const int64_t kvh = h / group;
      dot_rows_f32(kv.k(layer, 0) + kvh * hd, len, hd, hp_.kv_dim(), qh, scores.data());
      for (int64_t p = 0; p < len; ++p) scores[p] *= scale;
      softmax(scores.data(), len);
      float* oh = out + t * qd + h * hd;
      std::fill_n(oh, hd, 0.0f);
      for (int64_t p = 0; p < len; ++p) axpy(scores[p], kv.v(layer, p) + kvh * hd, oh, hd);
    }
  });
}

}  // namespace orchard
