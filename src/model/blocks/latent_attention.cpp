#include "model/blocks/latent_attention.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"
#include "tensor/latent_attention_kernels.h"
#include "tensor/level_matrix.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/quant.h"
#include "tensor/threadpool.h"

namespace orchard {
namespace {

// One product per head: y_h = W_h · x_h for n rows, W_h at w.data + h·rows·cols floats, x_h's
// row t (cols values) at src + t·src_stride + h·src_head, y_h's at dst + t·dst_stride + h·rows. Heads run as
// parallel jobs when each product is small enough to stay on one thread, else one after
// another, each product forking on its own. (A decoding step does its products inside the
// attention's own jobs instead.)
void per_head_products(const MatrixView& w, int64_t heads, int64_t n, const float* src, int64_t src_stride, float* dst,
                       int64_t dst_stride, bool batch_invariant, int64_t src_head) {
  const int64_t rows = w.rows, cols = w.cols;
  auto run = [&](int64_t h0, int64_t h1) {
    std::vector<uint8_t> scratch;
    ActivationVector x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t t = 0; t < n; ++t) std::copy_n(src + t * src_stride + h * src_head, cols, &x[static_cast<size_t>(t * cols)]);
      MatrixView wh = w;
      wh.data = static_cast<const float*>(w.data) + h * rows * cols;
      matmul(wh, x.data(), n, y.data(), scratch, batch_invariant);
      for (int64_t t = 0; t < n; ++t) std::copy_n(&y[static_cast<size_t>(t * rows)], rows, dst + t * dst_stride + h * rows);
    }
  };
  if (runs_serially(w.type, rows, cols, n)) global_pool().parallel_for(heads, 1, run);
  else run(0, heads);
}

}  // namespace

std::unique_ptr<KVCache> LatentAttention::new_cache(const HParams& hp, int64_t n_layers, int64_t n_ctx, KVType type) {
  return std::make_unique<KVCache>(n_layers, 1, hp.kv_lora_rank + hp.n_rot, n_ctx, type, /*values=*/false);
}

void LatentAttention::forward(const HParams& hp, int64_t heads, const LayerWeights& L, int64_t layer, const float* xn,
                              int64_t n, std::span<KVCache* const> kvs, std::span<const int32_t> seq_of,
                              std::span<const int64_t> pos_of, const float* rope_cs, float* out,
                              std::vector<uint8_t>& scratch, bool batch_invariant) {
  const LatentAttentionWeights& w = L.mla;
  const int64_t hd = hp.head_dim, rot = hp.n_rot, nope = hp.head_dim_nope(), lora = hp.kv_lora_rank,
                vd = hp.v_head_dim, kd = lora + rot, qd = heads * hd;

  // q = W_qb · rmsnorm(W_qa · x) · q_a_norm, or W_q · x;  [c | k_pe] = W_kva · x (W_qa and W_kva
  // read the same x: one product for both)
  q_.resize(static_cast<size_t>(n * qd));
  kva_.resize(static_cast<size_t>(n * kd));
  if (w.wq_b.rows > 0) {
    const int64_t r = hp.q_lora_rank;
    qa_.resize(static_cast<size_t>(n * r));
    const MatrixView ws[] = {w.wq_a, w.wkv_a};
    float* const ys[] = {qa_.data(), kva_.data()};
    matmul_shared(ws, xn, n, ys, scratch, batch_invariant);
    for (int64_t t = 0; t < n; ++t) rms_norm(&qa_[static_cast<size_t>(t * r)], w.q_a_norm, &qa_[static_cast<size_t>(t * r)], r, hp.rms_eps);
    matmul(w.wq_b, qa_.data(), n, q_.data(), scratch, batch_invariant);
  } else {
    const MatrixView ws[] = {L.wq, w.wkv_a};
    float* const ys[] = {q_.data(), kva_.data()};
    matmul_shared(ws, xn, n, ys, scratch, batch_invariant);
  }

  // the cache row is [rounded rmsnorm(c) · kv_a_norm | rope(k_pe)]
  const DType xt = vec_dot_type(w.kv_b_type);
  std::vector<uint8_t> rounded(xt == DType::F32 ? 0 : row_bytes(xt, lora));
  for (int64_t t = 0; t < n; ++t) {
    float* row = &kva_[static_cast<size_t>(t * kd)];
    rms_norm(row, w.kv_a_norm, row, lora, hp.rms_eps);
    if (xt != DType::F32) {
      quantize_activations(xt, row, rounded.data(), lora);
      dequantize_row(xt, rounded.data(), row, lora);
    }
    const float* cs = rope_cs + t * rot;
    rope_rotate(row + lora, rot, cs, /*neox=*/false);
    for (int64_t h = 0; h < heads; ++h) rope_rotate(&q_[static_cast<size_t>(t * qd + h * hd + nope)], rot, cs, false);
    kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])]->store_k(layer, pos_of[static_cast<size_t>(t)], row);
  }

  // A few rows (a decoding step): each attention job also moves its heads' queries into the
  // latent space and their latents out of it, one fork per layer instead of three. Each head's
  // products run on the job's thread, one row at a time, as batch_invariant needs anyway.
  // Integer levels (level_matrix.h) give a row the same bits alone or among others, so their
  // products go in the jobs for a few rows and per head over all rows (each level widened once
  // for several) for more.
  const bool levels = !w.k_levels.empty();
  const bool fused = levels ? n < 4
                            : runs_serially(w.wk_t.type, w.wk_t.rows, w.wk_t.cols, n) &&
                                  runs_serially(w.wv.type, w.wv.rows, w.wv.cols, n);
  // query_h = [W_k,hᵀ q_nope_h | q_pe_h], kd values per head
  query_.resize(static_cast<size_t>(n * heads * kd));
  auto make_query = [&](int64_t t, int64_t h) {
    float* qr = &query_[static_cast<size_t>((t * heads + h) * kd)];
    std::copy_n(&q_[static_cast<size_t>(t * qd + h * hd + nope)], rot, qr + lora);
  };
  if (!fused) {
    qabs_.resize(static_cast<size_t>(n * heads * lora));
    // (q_nope_h: the first nope values of head h's hd)
    if (levels)
      global_pool().parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h)
          rows_times_levels(w.k_levels[static_cast<size_t>(h)], &q_[static_cast<size_t>(h * hd)], n, qd,
                            &qabs_[static_cast<size_t>(h * lora)], heads * lora);
      });
    else
      per_head_products(w.wk_t, heads, n, q_.data(), qd, qabs_.data(), heads * lora, batch_invariant, hd);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        std::copy_n(&qabs_[static_cast<size_t>((t * heads + h) * lora)], lora, &query_[static_cast<size_t>((t * heads + h) * kd)]);
        make_query(t, h);
      }
  }

  // lat_h = Σ_p softmax_p(query_h · key_p / √key_length) · c_p. Jobs are a row × a run of heads:
  // a decoding step's one row still spreads over every thread, and a half-float cache is
  // widened once per job.
  lat_.resize(static_cast<size_t>(n * heads * lora));
  // 1/√key_length, times YaRN's magnitude correction squared when the rotation is scaled
  const float mscale = 1.0f + hp.yarn_log_mul * std::log(1.0f / hp.rope_freq_scale);
  const float scale = mscale * mscale / std::sqrt(static_cast<float>(hd));
  const int64_t threads = global_pool().size();
  const int64_t per_job = n >= threads ? heads : std::max<int64_t>(1, heads * n / (2 * threads));
  const int64_t chunks = (heads + per_job - 1) / per_job;
  // Balanced: a causal prompt's later rows cost more (see gqa_attention.cpp).
  global_pool().parallel_for_balanced(n * chunks, 1, [&](int64_t j0, int64_t j1) {
    std::vector<float> keys, scores;
    std::vector<const float*> query_rows;
    std::vector<float*> score_rows, lat_rows;
    std::vector<uint8_t> product_scratch;
    MatrixView wk = w.wk_t, wv = w.wv;
    for (int64_t job = j0; job < j1; ++job) {
      const int64_t t = job / chunks, h0 = job % chunks * per_job, h1 = std::min(heads, h0 + per_job);
      const KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t len = pos_of[static_cast<size_t>(t)] + 1;
      const float* kp = static_cast<const float*>(kv.k_panels(layer, 0));
      if (kv.type() == KVType::F16) {
        keys.resize(static_cast<size_t>(key_panels_size(len, kd)));
        to_floats(static_cast<const uint16_t*>(kv.k_panels(layer, 0)), keys.data(), key_panels_size(len, kd));
        kp = keys.data();
      }
      const int64_t stride = (len + kKeyPanel - 1) / kKeyPanel * kKeyPanel;
      scores.resize(static_cast<size_t>((h1 - h0) * stride));
      // query_h = [W_k,hᵀ q_nope_h | q_pe_h]
      if (levels) prefetch_levels(w.k_levels[static_cast<size_t>(h0)]);
      for (int64_t h = h0; h < h1 && fused; ++h) {
        float* qr = &query_[static_cast<size_t>((t * heads + h) * kd)];
        if (levels) {
          if (h + 1 < h1) prefetch_levels(w.k_levels[static_cast<size_t>(h + 1)]);
          vec_times_levels(w.k_levels[static_cast<size_t>(h)], &q_[static_cast<size_t>(t * qd + h * hd)], qr);
        } else {
          wk.data = static_cast<const float*>(w.wk_t.data) + h * lora * nope;
          matmul(wk, &q_[static_cast<size_t>(t * qd + h * hd)], 1, qr, product_scratch, batch_invariant);
        }
        make_query(t, h);
      }
      // (the value levels load while attention runs)
      for (int64_t h = h0; h < h1 && levels; ++h) prefetch_levels(w.v_levels[static_cast<size_t>(h)]);
      // scores[h][p] = scale · query_h · key_p, softmax over p (zero beyond, to the panel's end);
      // lat_h[d] = Σ_p scores[h][p] · c_p[d]: the latent is the key's first kv_lora_rank values
      const int nh = static_cast<int>(h1 - h0);
      query_rows.resize(static_cast<size_t>(nh));
      score_rows.resize(static_cast<size_t>(nh));
      lat_rows.resize(static_cast<size_t>(nh));
      for (int i = 0; i < nh; ++i) {
        query_rows[static_cast<size_t>(i)] = &query_[static_cast<size_t>((t * heads + h0 + i) * kd)];
        score_rows[static_cast<size_t>(i)] = &scores[static_cast<size_t>(i * stride)];
        lat_rows[static_cast<size_t>(i)] = &lat_[static_cast<size_t>((t * heads + h0 + i) * lora)];
      }
      latent_scores({query_rows.data(), nh, kp, kd, len, score_rows.data()});
      for (float* s : score_rows) {
        for (int64_t p = 0; p < len; ++p) s[p] *= scale;
        softmax(s, len);
        std::fill(s + len, s + stride, 0.0f);
      }
      latent_mix({score_rows.data(), nh, kp, kd, lora, len, lat_rows.data()});
      // out_h = W_v,h · lat_h
      for (int64_t h = h0; h < h1 && fused; ++h) {
        const float* lat = &lat_[static_cast<size_t>((t * heads + h) * lora)];
        if (levels) {
          vec_times_levels(w.v_levels[static_cast<size_t>(h)], lat, out + t * heads * vd + h * vd);
        } else {
          wv.data = static_cast<const float*>(w.wv.data) + h * vd * lora;
          matmul(wv, lat, 1, out + t * heads * vd + h * vd, product_scratch, batch_invariant);
        }
      }
    }
  });

  // out_h = W_v,h · lat_h
  if (fused) return;
  if (levels)
    global_pool().parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h)
        rows_times_levels(w.v_levels[static_cast<size_t>(h)], &lat_[static_cast<size_t>(h * lora)], n, heads * lora,
                          out + h * vd, heads * vd);
    });
  else
    per_head_products(w.wv, heads, n, lat_.data(), heads * lora, out, heads * vd, batch_invariant, lora);
}

}  // namespace orchard
