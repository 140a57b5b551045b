// One layer of the grouped-query families: llama (Llama 2/3, Mistral, and Mixtral when the file
// has experts), qwen2 / qwen2moe (attention biases; a gated shared expert), qwen3 / qwen3moe
// (Q/K norm). What differs between them is in the weights the file has (biases, norms,
// experts), bound at load; the steps are the same:
//   h = rmsnorm(x) · attn_norm
//   x = x + Σ_ranks Wo · attention(h)                       blocks/gqa_attention.h
//   h = rmsnorm(x) · ffn_norm
//   x = x + FFN(h)                                          dense SwiGLU or routed experts
#include "model/model.h"
#include "tensor/ops.h"

namespace orchard {

void Model::llama_layer(int64_t li, float* x, int64_t n, std::span<KVCache* const> kvs) {
  const LayerWeights& L = w_.layers[static_cast<size_t>(li)];
  const int64_t dim = hp_.dim;
  Buffers& b = buf_;

  // h = rmsnorm(x) · attn_norm
  for (int64_t t = 0; t < n; ++t) rms_norm(&x[t * dim], L.attn_norm, &b.xn[t * dim], dim, hp_.rms_eps);

  // att = attention over this shard's heads; x = x + Σ_ranks Wo·att (a rank holds its heads'
  // columns of Wo)
  gqa_.forward(hp_, {n_kv_heads_}, L, li, b.xn.data(), n, kvs, seq_of_, pos_of_, b.rope_cs.data(), b.att.data(),
               scratch_, batch_invariant_);
  matmul_cols(L.wo, L.wo_offset, b.att.data(), q_dim_, n, b.proj.data());
  if (split_heads_) partial_sum_->sum(b.proj.data(), static_cast<size_t>(n * dim));
  axpy(1.0f, b.proj.data(), x, n * dim);

  // x = x + FFN(rmsnorm(x) · ffn_norm)
  ffn_sublayer(li, x, n);
}

}  // namespace orchard
