#include "model/blocks/latent_attention.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace orchard {

std::unique_ptr<KVCache> LatentAttention::new_cache(const HParams& hp, int64_t n_layers, int64_t n_ctx, KVType type) {
  return std::make_unique<KVCache>(n_layers, 1, hp.kv_lora_rank + hp.n_rot, n_ctx, type, /*values=*/false);
}

void LatentAttention::forward(const HParams& hp, const LayerWeights& L, int64_t layer, const float* xn, int64_t n,
                              std::span<KVCache* const> kvs, std::span<const int32_t> seq_of,
                              std::span<const int64_t> pos_of, const float* rope_cs, float* out,
                              std::vector<uint8_t>& scratch, bool batch_invariant) {
  const LatentAttentionWeights& w = L.mla;
  const int64_t heads = hp.n_heads, hd = hp.head_dim, rot = hp.n_rot, nope = hp.head_dim_nope(),
                lora = hp.kv_lora_rank, vd = hp.v_head_dim, kd = lora + rot, qd = hp.q_dim();

  // q = W_qb · rmsnorm(W_qa · x) · q_a_norm, or W_q · x
  q_.resize(static_cast<size_t>(n * qd));
  if (w.wq_b.rows > 0) {
    const int64_t r = hp.q_lora_rank;
    qa_.resize(static_cast<size_t>(n * r));
    matmul(w.wq_a, xn, n, qa_.data(), scratch, batch_invariant);
    for (int64_t t = 0; t < n; ++t) rms_norm(&qa_[static_cast<size_t>(t * r)], w.q_a_norm, &qa_[static_cast<size_t>(t * r)], r, hp.rms_eps);
    matmul(w.wq_b, qa_.data(), n, q_.data(), scratch, batch_invariant);
  } else {
    matmul(L.wq, xn, n, q_.data(), scratch, batch_invariant);
  }

  // [c | k_pe] = W_kva · x; the cache row is [rounded rmsnorm(c) · kv_a_norm | rope(k_pe)]
  kva_.resize(static_cast<size_t>(n * kd));
  matmul(w.wkv_a, xn, n, kva_.data(), scratch, batch_invariant);
  const DType xt = vec_dot_type(w.kv_b_type);
  std::vector<uint8_t> rounded(xt == DType::F32 ? 0 : row_bytes(xt, lora));
  for (int64_t t = 0; t < n; ++t) {
    float* row = &kva_[static_cast<size_t>(t * kd)];
    rms_norm(row, w.kv_a_norm, row, lora, hp.rms_eps);
    if (xt != DType::F32) {
      quantize_row(xt, row, rounded.data(), lora);
      dequantize_row(xt, rounded.data(), row, lora);
    }
    const float* cs = rope_cs + t * rot;
    rope_rotate(row + lora, rot, cs, /*neox=*/false);
    for (int64_t h = 0; h < heads; ++h) rope_rotate(&q_[static_cast<size_t>(t * qd + h * hd + nope)], rot, cs, false);
    kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])]->store_k(layer, pos_of[static_cast<size_t>(t)], row);
  }

  // query_h = [W_k,hᵀ q_nope_h | q_pe_h], kd values per head
  query_.resize(static_cast<size_t>(n * heads * kd));
  nope_.resize(static_cast<size_t>(n * nope));
  qabs_.resize(static_cast<size_t>(n * lora));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(&q_[static_cast<size_t>(t * qd + h * hd)], nope, &nope_[static_cast<size_t>(t * nope)]);
    MatrixView wk = w.wk_t;
    wk.data = static_cast<const float*>(w.wk_t.data) + h * lora * nope;
    matmul(wk, nope_.data(), n, qabs_.data(), scratch, batch_invariant);
    for (int64_t t = 0; t < n; ++t) {
      float* qr = &query_[static_cast<size_t>((t * heads + h) * kd)];
      std::copy_n(&qabs_[static_cast<size_t>(t * lora)], lora, qr);
      std::copy_n(&q_[static_cast<size_t>(t * qd + h * hd + nope)], rot, qr + lora);
    }
  }

  // lat_h = Σ_p softmax_p(query_h · key_p / √key_length) · c_p, every (row, head) on its own
  lat_.resize(static_cast<size_t>(n * heads * lora));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  global_pool().parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> keys, scores;
    for (int64_t t = t0; t < t1; ++t) {
      const KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t len = pos_of[static_cast<size_t>(t)] + 1;
      const float* kp = static_cast<const float*>(kv.k_panels(layer, 0));
      if (kv.type() == KVType::F16) {
        keys.resize(static_cast<size_t>(key_panels_size(len, kd)));
        to_floats(static_cast<const uint16_t*>(kv.k_panels(layer, 0)), keys.data(), key_panels_size(len, kd));
        kp = keys.data();
      }
      scores.resize(static_cast<size_t>(len));
      for (int64_t h = 0; h < heads; ++h) {
        const float* qr = &query_[static_cast<size_t>((t * heads + h) * kd)];
        for (int64_t p0 = 0; p0 < len; p0 += kKeyPanel) {
          float acc[kKeyPanel] = {};
          const float* panel = kp + key_offset(p0, 0, kd);
          for (int64_t d = 0; d < kd; ++d)
            for (int64_t j = 0; j < kKeyPanel; ++j) acc[j] += qr[d] * panel[d * kKeyPanel + j];
          std::copy_n(acc, std::min<int64_t>(kKeyPanel, len - p0), &scores[static_cast<size_t>(p0)]);
        }
        for (int64_t p = 0; p < len; ++p) scores[static_cast<size_t>(p)] *= scale;
        softmax(scores.data(), len);
        float* lat = &lat_[static_cast<size_t>((t * heads + h) * lora)];
        for (int64_t d = 0; d < lora; ++d) {
          float acc = 0;
          for (int64_t p = 0; p < len; ++p) acc += scores[static_cast<size_t>(p)] * kp[key_offset(p, d, kd)];
          lat[d] = acc;
        }
      }
    }
  });

  // out_h = W_v,h · lat_h
  v_.resize(static_cast<size_t>(n * vd));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(&lat_[static_cast<size_t>((t * heads + h) * lora)], lora, &qabs_[static_cast<size_t>(t * lora)]);
    MatrixView wv = w.wv;
    wv.data = static_cast<const float*>(w.wv.data) + h * vd * lora;
    matmul(wv, qabs_.data(), n, v_.data(), scratch, batch_invariant);
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(&v_[static_cast<size_t>(t * vd)], vd, out + t * heads * vd + h * vd);
  }
}

}  // namespace orchard
