#pragma once
// Multi-head latent attention (DeepSeek V2/V3, Kimi K2: GGUF `deepseek2`), with the cache
// holding per position only the compressed latent c and the shared RoPE key k_pe:
//   q_h           = W_qb · rmsnorm(W_qa · x) · q_a_norm   (or W_q · x),  [q_nope_h | q_pe_h]
//   [c | k_pe]    = W_kva · x,   c = rmsnorm(c) · kv_a_norm,   q_pe_h, k_pe rotated (RoPE)
//   k_nope_h,p    = W_k,h · c_p          v_h,p = W_v,h · c_p           (W_kvb, per head)
//   score_h,p     = (q_nope_h · k_nope_h,p + q_pe_h · k_pe_p) / √key_length
//   out_h         = Σ_p softmax(score_h)_p · v_h,p
// computed absorbed: q_nope_h · W_k,h c_p = (W_k,hᵀ q_nope_h) · c_p, and Σ_p a_p W_v,h c_p =
// W_v,h (Σ_p a_p c_p), so no step expands the cache into per-head keys and values. llama.cpp
// rounds c to W_kvb's activation format before its product; the cache keeps c rounded the same
// way, which keeps the two within float rounding of each other.
#include <cstdint>
#include <span>
#include <vector>

#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "tensor/huge_buffer.h"

namespace orchard {

class LatentAttention {
 public:
  // A cache for `n_layers` layers: one key row of kv_lora_rank + n_rot values per position.
  static std::unique_ptr<KVCache> new_cache(const HParams& hp, int64_t n_layers, int64_t n_ctx, KVType type);

  // xn: n rows of dim. Row t belongs to kvs[seq_of[t]] at position pos_of[t]; rope_cs holds
  // each row's rotation (rope_angles, n_rot values). Stores the rows' latents in the caches
  // (every rank keeps the whole latent: all heads read it) and writes out: n rows of
  // heads·v_head_dim, the input of this shard's columns of attn_output. `heads`: the query heads
  // L holds (all of them unless tensor parallel splits them).
  void forward(const HParams& hp, int64_t heads, const LayerWeights& L, int64_t layer, const float* xn, int64_t n,
               std::span<KVCache* const> kvs, std::span<const int32_t> seq_of, std::span<const int64_t> pos_of,
               const float* rope_cs, float* out, std::vector<uint8_t>& scratch, bool batch_invariant);

 private:
  ActivationVector qa_, q_, kva_, qabs_, query_, lat_;
};

}  // namespace orchard
