#include "model/llama.h"

#include <algorithm>
#include <cmath>

#include "model/forward.h"
#include "model/blocks/latent_attention.h"
#include "model/gguf.h"
#include "tensor/attention.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/threadpool.h"

namespace orchard {

LlamaModel::LlamaModel(const GGUFFile& file, bool repack, const Shard& shard, PartialSum* partial_sum)
    : hp_(HParams::from_gguf(file)), w_(ModelWeights::bind(file, hp_, shard)), partial_sum_(partial_sum) {
  const Shard& s = w_.shard;
  if (s.splits_tensors(hp_) && !partial_sum_)
    throw Error("a tensor-parallel shard (" + s.describe() + ") needs a way to sum partial results");
  n_kv_heads_ = s.n_kv_heads();
  n_heads_ = n_kv_heads_ * (hp_.n_heads / hp_.n_kv_heads);
  q_dim_ = n_heads_ * hp_.head_dim;
  kv_dim_ = n_kv_heads_ * hp_.head_dim;
  ffn_dim_ = s.n_ffn();
  router_ = RouterConfig::of(hp_);
  // Partial results are summed across ranks only where this shard holds a part: replicated
  // parts (attention under expert parallel, experts under tensor parallel) are whole already.
  split_heads_ = s.n_kv_heads() != hp_.n_kv_heads;
  split_ffn_ = s.n_ffn() != hp_.ffn_dim;
  split_experts_ = s.n_experts() != hp_.n_expert;
  if (repack) w_.pack_for_cpu(&file);
}

void LocalForward::feed(std::span<const TokenId> tokens, std::vector<float>& logits) {
  model_.forward(tokens, kv_, logits);
}

std::unique_ptr<KVCache> LlamaModel::new_cache(int64_t n_ctx, KVType type) const {
  if (hp_.mla()) return LatentAttention::new_cache(hp_, shard().n_layers(), n_ctx, type);
  return std::make_unique<KVCache>(shard().n_layers(), n_kv_heads_, hp_.head_dim, n_ctx, type);
}

void LlamaModel::forward(std::span<const int32_t> tokens, KVCache& kv, std::vector<float>& logits,
                         bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("forward: no tokens to process");
  buf_.x.resize(static_cast<size_t>(n * hp_.dim));
  embed(tokens, buf_.x.data());
  run_layers(buf_.x.data(), n, kv);
  project(buf_.x.data(), n, all_logits, logits);
}

void LlamaModel::embed(std::span<const int32_t> tokens, float* x) const {
  if (!shard().embed) throw Error("embed: this shard does not hold the token embeddings");
  for (int32_t t : tokens)
    if (t < 0 || t >= hp_.n_vocab)
      throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(hp_.n_vocab) + ")");
  // x = embedding rows of the tokens
  for (size_t t = 0; t < tokens.size(); ++t) get_row(w_.tok_embd, tokens[t], x + static_cast<int64_t>(t) * hp_.dim);
}

void LlamaModel::matmul_cols(const MatrixView& w, int64_t offset, const float* x, int64_t width, int64_t n,
                             float* y) {
  if (offset == 0 && width == w.cols) {
    matmul(w, x, n, y, scratch_, batch_invariant_);
    return;
  }
  ActivationVector& p = buf_.padded;
  p.assign(static_cast<size_t>(n * w.cols), 0.0f);
  for (int64_t t = 0; t < n; ++t) std::copy_n(x + t * width, width, &p[static_cast<size_t>(t * w.cols + offset)]);
  matmul(w, p.data(), n, y, scratch_, batch_invariant_);
}

BatchRows::BatchRows(std::span<const BatchSeq> seqs) {
  if (seqs.empty()) throw Error("forward: no sequences to process");
  for (const BatchSeq& s : seqs) {
    if (s.tokens.empty()) throw Error("forward: a sequence in the batch has no tokens");
    kvs.push_back(s.kv);
    lengths.push_back(static_cast<int64_t>(s.tokens.size()));
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  }
}

void BatchRows::last_rows(const float* x, int64_t dim, std::vector<float>& out) const {
  out.resize(lengths.size() * static_cast<size_t>(dim));
  int64_t end = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    end += lengths[i];
    std::copy_n(x + (end - 1) * dim, dim, &out[i * static_cast<size_t>(dim)]);
  }
}

void LlamaModel::forward_batch(std::span<const BatchSeq> seqs, std::vector<float>& logits) {
  const BatchRows b(seqs);
  const int64_t n = static_cast<int64_t>(b.tokens.size()), dim = hp_.dim;
  buf_.x.resize(static_cast<size_t>(n * dim));
  embed(b.tokens, buf_.x.data());
  run_layers(buf_.x.data(), b.kvs, b.lengths);
  // Only each sequence's last row is projected.
  std::vector<float> last;
  b.last_rows(buf_.x.data(), dim, last);
  project(last.data(), static_cast<int64_t>(seqs.size()), true, logits);
}

void LlamaModel::run_layers(float* x, int64_t n, KVCache& kv) {
  KVCache* kvs[] = {&kv};
  const int64_t lengths[] = {n};
  run_layers(x, kvs, lengths);
}

void LlamaModel::run_layers(float* x, std::span<KVCache* const> kvs, std::span<const int64_t> lengths) {
  int64_t n = 0;
  seq_of_.clear();
  pos_of_.clear();
  for (size_t s = 0; s < kvs.size(); ++s) {
    kvs[s]->reserve(lengths[s]);
    for (int64_t t = 0; t < lengths[s]; ++t) {
      seq_of_.push_back(static_cast<int32_t>(s));
      pos_of_.push_back(kvs[s]->size() + t);
    }
    n += lengths[s];
  }
  if (n == 0) throw Error("forward: no tokens to process");
  const int64_t dim = hp_.dim, qd = q_dim_, kvd = kv_dim_, ffn = ffn_dim_;
  // Activations live in buffers kept across calls: fresh ones every call cost page faults.
  Buffers& b = buf_;
  for (auto* vec : {&b.xn, &b.proj}) vec->resize(static_cast<size_t>(n * dim));
  b.q.resize(static_cast<size_t>(n * qd));
  b.att.resize(static_cast<size_t>(n * std::max(qd, n_heads_ * hp_.v_head_dim)));
  for (auto* vec : {&b.k, &b.v}) vec->resize(static_cast<size_t>(n * kvd));
  for (auto* vec : {&b.gate, &b.up}) vec->resize(static_cast<size_t>(n * ffn));
  ActivationVector &xn = b.xn, &att = b.att, &proj = b.proj, &gate = b.gate, &up = b.up;
  const int64_t n_rot = hp_.n_rot;
  b.rope_cs.resize(static_cast<size_t>(n * n_rot));
  for (int64_t t = 0; t < n; ++t)
    rope_angles(n_rot, pos_of_[static_cast<size_t>(t)], hp_.rope_base, hp_.rope_freq_scale, w_.rope_freqs,
                &b.rope_cs[static_cast<size_t>(t * n_rot)]);

  for (int64_t li = 0; li < shard().n_layers(); ++li) {
    const LayerWeights& L = w_.layers[static_cast<size_t>(li)];

    // xn = rmsnorm(x) · attn_norm
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.attn_norm, &xn[t * dim], dim, hp_.rms_eps);

    if (hp_.mla()) {
      // att = latent attention (blocks/latent_attention.h); x = x + Wo·att
      mla_.forward(hp_, L, li, xn.data(), n, kvs, seq_of_, pos_of_, b.rope_cs.data(), att.data(), scratch_,
                   batch_invariant_);
      matmul(L.wo, att.data(), n, proj.data(), scratch_, batch_invariant_);
    } else {
      attention_block(L, li, n, kvs);
    }
    if (split_heads_) partial_sum_->sum(proj.data(), static_cast<size_t>(n * dim));
    axpy(1.0f, proj.data(), x, n * dim);

    // x = x + FFN(xn), xn = rmsnorm(x) · ffn_norm: dense, or routed experts (blocks/moe_ffn.h)
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.ffn_norm, &xn[t * dim], dim, hp_.rms_eps);
    if (L.is_moe()) {
      moe_.forward(L.moe, router_, xn.data(), n, dim, proj.data(), scratch_, batch_invariant_);
      if (routing_observer_) routing_observer_(shard().layer_begin + li, moe_.experts(), moe_.weights());
      // expert parallel: each rank added its own experts' outputs; Σ over ranks in fixed order
      if (split_experts_) partial_sum_->sum(proj.data(), static_cast<size_t>(n * dim));
      axpy(1.0f, proj.data(), x, n * dim);
      continue;
    }
    // Dense: x = x + Σ_ranks W_down·(silu(W_gate·xn) ⊙ W_up·xn)
    {
      const MatrixView ws[] = {L.w_gate, L.w_up};
      float* const ys[] = {gate.data(), up.data()};
      matmul_shared(ws, xn.data(), n, ys, scratch_, batch_invariant_);
    }
    swiglu(gate.data(), up.data(), gate.data(), n * ffn);
    matmul_cols(L.w_down, L.down_offset, gate.data(), ffn, n, proj.data());
    if (split_ffn_) partial_sum_->sum(proj.data(), static_cast<size_t>(n * dim));
    axpy(1.0f, proj.data(), x, n * dim);
  }
  for (size_t s = 0; s < kvs.size(); ++s) kvs[s]->advance(lengths[s]);
}

// Grouped-query attention with RoPE: proj = Σ_ranks Wo·attention(q, k, v) for the layer's rows.
void LlamaModel::attention_block(const LayerWeights& L, int64_t li, int64_t n, std::span<KVCache* const> kvs) {
  const int64_t qd = q_dim_, kvd = kv_dim_, hd = hp_.head_dim, n_rot = hp_.n_rot;
  const bool neox = hp_.rope_order == RopeOrder::NeoX;
  Buffers& b = buf_;
  ActivationVector &xn = b.xn, &q = b.q, &k = b.k, &v = b.v, &att = b.att, &proj = b.proj;
  // q = Wq·xn (+bq), k = Wk·xn (+bk), v = Wv·xn (+bv)   (this shard's heads only)
  {
    const MatrixView ws[] = {L.wq, L.wk, L.wv};
    float* const ys[] = {q.data(), k.data(), v.data()};
    matmul_shared(ws, xn.data(), n, ys, scratch_, batch_invariant_);
  }
  if (L.bq) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < qd; ++i) q[t * qd + i] += L.bq[i];
      for (int64_t i = 0; i < kvd; ++i) k[t * kvd + i] += L.bk[i], v[t * kvd + i] += L.bv[i];
    }
  }

  for (int64_t t = 0; t < n; ++t) {
    // qwen3: q_h = rmsnorm(q_h) · q_norm, k_h = rmsnorm(k_h) · k_norm, per head
    if (L.q_norm) {
      for (int64_t h = 0; h < n_heads_; ++h) rms_norm(&q[t * qd + h * hd], L.q_norm, &q[t * qd + h * hd], hd, hp_.rms_eps);
      for (int64_t h = 0; h < n_kv_heads_; ++h) rms_norm(&k[t * kvd + h * hd], L.k_norm, &k[t * kvd + h * hd], hd, hp_.rms_eps);
    }
    // q_h, k_h = rope(q_h, pos), rope(k_h, pos)
    const int64_t pos = pos_of_[static_cast<size_t>(t)];
    KVCache& kv = *kvs[static_cast<size_t>(seq_of_[static_cast<size_t>(t)])];
    const float* cs = &b.rope_cs[static_cast<size_t>(t * n_rot)];
    for (int64_t h = 0; h < n_heads_; ++h) rope_rotate(&q[t * qd + h * hd], n_rot, cs, neox);
    for (int64_t h = 0; h < n_kv_heads_; ++h) rope_rotate(&k[t * kvd + h * hd], n_rot, cs, neox);
    kv.store_k(li, pos, &k[t * kvd]);
    kv.store_v(li, pos, &v[t * kvd]);
  }

  // att = softmax(q·Kᵀ / √head_dim + causal mask) · V, per head (GQA: heads share KV heads)
  attention(li, q.data(), n, kvs, seq_of_, pos_of_, att.data());

  // proj = Wo·att   (each tensor-parallel rank holds some heads' columns of Wo)
  matmul_cols(L.wo, L.wo_offset, att.data(), qd, n, proj.data());
}

void LlamaModel::project(const float* x, int64_t n, bool all_logits, std::vector<float>& logits) {
  if (!shard().head) throw Error("project: this shard does not hold the output head");
  const int64_t dim = hp_.dim;
  // logits = W_out · rmsnorm(x) · output_norm, for every token or only the last
  const int64_t first = all_logits ? 0 : n - 1, rows = n - first;
  buf_.xn.resize(static_cast<size_t>(rows * dim));
  for (int64_t t = first; t < n; ++t)
    rms_norm(&x[t * dim], w_.output_norm, &buf_.xn[static_cast<size_t>((t - first) * dim)], dim, hp_.rms_eps);
  logits.resize(static_cast<size_t>(rows * shard().n_vocab()));
  matmul(w_.output, buf_.xn.data(), rows, logits.data(), scratch_, batch_invariant_);
}

void LlamaModel::attention(int64_t layer, const float* q, int64_t n, std::span<KVCache* const> kvs,
                           std::span<const int32_t> seq_of, std::span<const int64_t> pos_of, float* out) {
  const int64_t hd = hp_.head_dim, qd = q_dim_, group = hp_.n_heads / hp_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (attend_available(hd)) {
    // Jobs: a run of up to 16 tokens of one sequence × some of its KV heads, whose `group`
    // query heads share their keys. Rows of a sequence lie end to end. A job takes several
    // heads when there are runs enough to keep every thread busy: decoding one token, the
    // kernel then works on the heads side by side.
    struct Job {
      int64_t t0, ntok, kvh, nkv;
    };
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int64_t t = 0; t < n;) {
      int64_t end = t + 1;
      while (end < n && end - t < 16 && seq_of[static_cast<size_t>(end)] == seq_of[static_cast<size_t>(t)]) ++end;
      runs.emplace_back(t, end - t);
      t = end;
    }
    const int64_t threads = global_pool().size();
    const int64_t heads_per_job =
        threads <= 1 ? n_kv_heads_
                     : std::clamp<int64_t>(static_cast<int64_t>(runs.size()) * n_kv_heads_ / (2 * threads), 1, n_kv_heads_);
    std::vector<Job> jobs;
    for (const auto& [t0, ntok] : runs)
      for (int64_t kvh = 0; kvh < n_kv_heads_; kvh += heads_per_job)
        jobs.push_back({t0, ntok, kvh, std::min(heads_per_job, n_kv_heads_ - kvh)});
    len_of_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) len_of_[static_cast<size_t>(t)] = pos_of[static_cast<size_t>(t)] + 1;
    global_pool().parallel_for(static_cast<int64_t>(jobs.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const Job& job = jobs[static_cast<size_t>(j)];
        KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(job.t0)])];
        AttendArgs a;
        a.kv_type = kv.type();
        a.q = q + job.t0 * qd + job.kvh * group * hd;
        a.out = out + job.t0 * qd + job.kvh * group * hd;
        a.tok_stride = qd;
        a.ntok = job.ntok;
        a.group = group;
        a.len = len_of_.data() + job.t0;
        a.k = kv.k_panels(layer, job.kvh);
        a.v = kv.v_head(layer, job.kvh);
        a.kv_stride = kv_dim_;
        a.head_dim = hd;
        a.scale = scale;
        a.n_kv = job.nkv;
        a.k_head_stride = job.nkv > 1 ? kv.k_head_stride() : 0;
        attend(a);
      }
    });
    return;
  }
  int64_t longest = 0;
  for (int64_t t = 0; t < n; ++t) longest = std::max(longest, pos_of[static_cast<size_t>(t)] + 1);
  // Every (row, KV head) pair is independent: threads take contiguous runs of them. A cache of
  // halves has a pair's keys and values widened once for the `group` query heads sharing them.
  global_pool().parallel_for(n * n_kv_heads_, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(longest)), keys, values;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / n_kv_heads_, kvh = job % n_kv_heads_;
      KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t len = pos_of[static_cast<size_t>(t)] + 1;  // causal: itself and everything before
      const float* kp = static_cast<const float*>(kv.k_panels(layer, kvh));
      const float* vp0 = static_cast<const float*>(kv.v_head(layer, kvh));
      int64_t v_stride = kv_dim_;
      if (kv.type() == KVType::F16) {
        keys.resize(static_cast<size_t>(key_panels_size(len, hd)));
        to_floats(static_cast<const uint16_t*>(kv.k_panels(layer, kvh)), keys.data(), key_panels_size(len, hd));
        values.resize(static_cast<size_t>(len * hd));
        for (int64_t p = 0; p < len; ++p)
          to_floats(static_cast<const uint16_t*>(kv.v_head(layer, kvh)) + p * kv_dim_, &values[static_cast<size_t>(p * hd)], hd);
        kp = keys.data();
        vp0 = values.data();
        v_stride = hd;
      }
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* qh = q + t * qd + h * hd;
        // scores[p] = Σ_d q_h[d]·K[p][d], a panel of 32 positions at a time
        for (int64_t p0 = 0; p0 < len; p0 += kKeyPanel) {
          float acc[kKeyPanel] = {};
          const float* panel = kp + key_offset(p0, 0, hd);
          for (int64_t d = 0; d < hd; ++d)
            for (int64_t j = 0; j < kKeyPanel; ++j) acc[j] += qh[d] * panel[d * kKeyPanel + j];
          std::copy_n(acc, std::min<int64_t>(kKeyPanel, len - p0), &scores[static_cast<size_t>(p0)]);
        }
        for (int64_t p = 0; p < len; ++p) scores[p] *= scale;
        softmax(scores.data(), len);
        // out_h = Σ_p scores[p] · V_p: written out here (not axpy per position) so the compiler
        // keeps out_h in registers across positions; per-call overhead dominated at small heads.
        float* oh = out + t * qd + h * hd;
        std::fill_n(oh, hd, 0.0f);
        const float* vp = vp0;
        for (int64_t p = 0; p < len; ++p, vp += v_stride) {
          const float sp = scores[p];
          for (int64_t d = 0; d < hd; ++d) oh[d] += sp * vp[d];
        }
      }
    }
  });
}

}  // namespace orchard
