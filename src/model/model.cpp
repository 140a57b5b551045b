#include "model/model.h"

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

Model::Model(const GGUFFile& file, bool repack, const Shard& shard, PartialSum* partial_sum)
    : hp_(HParams::from_gguf(file)), w_(ModelWeights::bind(file, hp_, shard)), partial_sum_(partial_sum) {
  const Shard& s = w_.shard;
  if (s.splits_tensors(hp_) && !partial_sum_)
    throw Error("a tensor-parallel shard (" + s.describe() + ") needs a way to sum partial results");
  n_kv_heads_ = s.n_kv_heads();
  n_heads_ = n_kv_heads_ * (hp_.n_heads / hp_.n_kv_heads);
  q_dim_ = n_heads_ * hp_.head_dim;
  ffn_dim_ = s.n_ffn();
  router_ = RouterConfig::of(hp_);
  if (hp_.rope_yarn) {
    // deepseek2 moves YaRN's magnitude correction into the attention scale (latent_attention),
    // so its rotation gets 1 / (1 + 0.1·ln(1/freq_scale)), which cancels the one YaRN adds.
    const float attn = hp_.mla() ? 1.0f / (1.0f + 0.1f * std::log(1.0f / hp_.rope_freq_scale)) : 1.0f;
    yarn_ = RopeYarn::make(hp_.n_rot, hp_.yarn_orig_ctx, hp_.rope_base, attn);
  }
  // Partial results are summed across ranks only where this shard holds a part: replicated
  // parts (attention where an expert plan keeps it whole) are whole already.
  split_heads_ = s.n_kv_heads() != hp_.n_kv_heads;
  split_ffn_ = s.n_ffn() != hp_.ffn_dim;
  split_experts_ = s.n_experts() != hp_.n_expert || s.n_shexp() != hp_.shared_ffn_dim ||
                   s.n_expert_ffn() != hp_.expert_ffn_dim;
  if (repack) w_.pack_for_cpu(&file);
}

void LocalForward::feed(std::span<const TokenId> tokens, std::vector<float>& logits) {
  model_.forward(tokens, kv_, logits);
}

std::unique_ptr<KVCache> Model::new_cache(int64_t n_ctx, KVType type) const {
  if (hp_.mla()) return LatentAttention::new_cache(hp_, shard().n_layers(), n_ctx, type);
  return std::make_unique<KVCache>(shard().n_layers(), n_kv_heads_, hp_.head_dim, n_ctx, type);
}

void Model::forward(std::span<const int32_t> tokens, KVCache& kv, std::vector<float>& logits,
                         bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("forward: no tokens to process");
  buf_.x.resize(static_cast<size_t>(n * hp_.dim));
  embed(tokens, buf_.x.data());
  run_layers(buf_.x.data(), n, kv);
  project(buf_.x.data(), n, all_logits, logits);
}

void Model::embed(std::span<const int32_t> tokens, float* x) const {
  if (!shard().embed) throw Error("embed: this shard does not hold the token embeddings");
  for (int32_t t : tokens)
    if (t < 0 || t >= hp_.n_vocab)
      throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(hp_.n_vocab) + ")");
  // x = embedding rows of the tokens
  for (size_t t = 0; t < tokens.size(); ++t) get_row(w_.tok_embd, tokens[t], x + static_cast<int64_t>(t) * hp_.dim);
}

void Model::matmul_cols(const MatrixView& w, int64_t offset, const float* x, int64_t width, int64_t n,
                        float* y) {
  orchard::matmul_cols(w, offset, x, width, n, y, buf_.padded, scratch_, batch_invariant_);
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

void Model::forward_batch(std::span<const BatchSeq> seqs, std::vector<float>& logits) {
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

void Model::run_layers(float* x, int64_t n, KVCache& kv) {
  KVCache* kvs[] = {&kv};
  const int64_t lengths[] = {n};
  run_layers(x, kvs, lengths);
}

void Model::run_layers(float* x, std::span<KVCache* const> kvs, std::span<const int64_t> lengths) {
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
  const int64_t dim = hp_.dim;
  // Activations live in buffers kept across calls: fresh ones every call cost page faults.
  Buffers& b = buf_;
  for (auto* vec : {&b.xn, &b.proj}) vec->resize(static_cast<size_t>(n * dim));
  b.att.resize(static_cast<size_t>(n * std::max(q_dim_, n_heads_ * hp_.v_head_dim)));
  for (auto* vec : {&b.gate, &b.up}) vec->resize(static_cast<size_t>(n * ffn_dim_));
  const int64_t n_rot = hp_.n_rot;
  b.rope_cs.resize(static_cast<size_t>(n * n_rot));
  for (int64_t t = 0; t < n; ++t)
    rope_angles(n_rot, pos_of_[static_cast<size_t>(t)], hp_.rope_base, hp_.rope_freq_scale, w_.rope_freqs, yarn_,
                &b.rope_cs[static_cast<size_t>(t * n_rot)]);

  // Each family's layer reads top to bottom in its own file (families/).
  for (int64_t li = 0; li < shard().n_layers(); ++li) {
    if (hp_.mla()) deepseek2_layer(li, x, n, kvs);
    else llama_layer(li, x, n, kvs);
  }
  for (size_t s = 0; s < kvs.size(); ++s) kvs[s]->advance(lengths[s]);
}

// x = x + FFN(rmsnorm(x) · ffn_norm): dense SwiGLU, its columns split between tensor-parallel
// ranks, or routed experts (blocks/moe_ffn.h), split between expert-parallel ranks.
void Model::ffn_sublayer(int64_t li, float* x, int64_t n) {
  const LayerWeights& L = w_.layers[static_cast<size_t>(li)];
  const int64_t dim = hp_.dim, ffn = ffn_dim_;
  Buffers& b = buf_;
  for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.ffn_norm, &b.xn[t * dim], dim, hp_.rms_eps);
  if (L.is_moe()) {
    // proj = Σ_k w_k · expert_k(xn) (+ shared); Σ over the ranks holding the experts
    moe_.forward(L.moe, router_, b.xn.data(), n, dim, b.proj.data(), scratch_, batch_invariant_);
    if (routing_observer_) routing_observer_(shard().layer_begin + li, moe_.experts(), moe_.weights());
    if (split_experts_) partial_sum_->sum(b.proj.data(), static_cast<size_t>(n * dim));
  } else {
    // proj = Σ_ranks W_down·(silu(W_gate·xn) ⊙ W_up·xn)
    const MatrixView ws[] = {L.w_gate, L.w_up};
    float* const ys[] = {b.gate.data(), b.up.data()};
    matmul_shared(ws, b.xn.data(), n, ys, scratch_, batch_invariant_);
    swiglu(b.gate.data(), b.up.data(), b.gate.data(), n * ffn);
    matmul_cols(L.w_down, L.down_offset, b.gate.data(), ffn, n, b.proj.data());
    if (split_ffn_) partial_sum_->sum(b.proj.data(), static_cast<size_t>(n * dim));
  }
  axpy(1.0f, b.proj.data(), x, n * dim);
}

void Model::project(const float* x, int64_t n, bool all_logits, std::vector<float>& logits) {
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

}  // namespace orchard
