// One layer of deepseek2 (DeepSeek V2/V3/R1, Kimi K2):
//   h = rmsnorm(x) · attn_norm
//   x = x + Σ_ranks Wo · latent_attention(h)   the cache holds the compressed latent and the
//                                         RoPE key, not per-head keys and values (blocks/latent_attention.h)
//   h = rmsnorm(x) · ffn_norm
//   x = x + FFN(h)                        the first leading_dense_block_count layers dense, the
//                                         rest routed experts (sigmoid scores with a selection
//                                         bias, normalised and scaled weights) + shared experts
#include "model/model.h"
#include "tensor/ops.h"

namespace orchard {

void Model::deepseek2_layer(int64_t li, float* x, int64_t n, std::span<KVCache* const> kvs) {
  const LayerWeights& L = w_.layers[static_cast<size_t>(li)];
  const int64_t dim = hp_.dim;
  Buffers& b = buf_;

  // h = rmsnorm(x) · attn_norm
  for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.attn_norm, &b.xn[t * dim], dim, hp_.rms_eps);

  // att = latent attention over this shard's query heads; x = x + Σ_ranks Wo·att (a rank holds
  // its heads' columns of Wo; every rank keeps the whole latent cache)
  mla_.forward(hp_, n_heads_, L, li, b.xn.data(), n, kvs, seq_of_, pos_of_, b.rope_cs.data(), b.att.data(), scratch_,
               batch_invariant_);
  matmul_cols(L.wo, L.wo_offset, b.att.data(), n_heads_ * hp_.v_head_dim, n, b.proj.data());
  if (split_heads_) partial_sum_->sum(b.proj.data(), static_cast<size_t>(n * dim));
  axpy(1.0f, b.proj.data(), x, n * dim);

  // x = x + FFN(rmsnorm(x) · ffn_norm)
  ffn_sublayer(li, x, n);
}

}  // namespace orchard
