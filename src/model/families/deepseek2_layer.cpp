// One layer of deepseek2 (DeepSeek V2/V3/R1, Kimi K2):
//   h = rmsnorm(x) · attn_norm
//   x = x + Wo · latent_attention(h)      the cache holds the compressed latent and the RoPE
//                                         key, not per-head keys and values (blocks/latent_attention.h)
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

  // x = x + Wo · latent_attention(h)   (every rank holds all heads: latent attention is not split)
  mla_.forward(hp_, L, li, b.xn.data(), n, kvs, seq_of_, pos_of_, b.rope_cs.data(), b.att.data(), scratch_,
               batch_invariant_);
  matmul(L.wo, b.att.data(), n, b.proj.data(), scratch_, batch_invariant_);
  axpy(1.0f, b.proj.data(), x, n * dim);

  // x = x + FFN(rmsnorm(x) · ffn_norm)
  ffn_sublayer(li, x, n);
}

}  // namespace orchard
