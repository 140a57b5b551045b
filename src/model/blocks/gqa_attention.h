#pragma once
// Grouped-query attention with rotary positions (llama, mistral, qwen2, qwen3 and their MoE
// variants), for this shard's heads:
//   q, k, v = Wq·x (+bq), Wk·x (+bk), Wv·x (+bv)
//   q_h, k_h = rmsnorm(q_h)·q_norm, rmsnorm(k_h)·k_norm      (qwen3: per head, before RoPE)
//   q_h, k_h = rope(q_h, pos), rope(k_h, pos)               k, v appended to the cache
//   out_h = softmax(q_h·Kᵀ / √head_dim + causal mask) · V    query heads share KV heads (GQA)
#include <cstdint>
#include <span>
#include <vector>

#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "tensor/huge_buffer.h"

namespace orchard {

class GqaAttention {
 public:
  // The KV heads a shard holds (tensor parallel: a range; its query heads follow them).
  struct Heads {
    int64_t n_kv_heads;
    int64_t n_heads(const HParams& hp) const { return n_kv_heads * (hp.n_heads / hp.n_kv_heads); }
    int64_t q_dim(const HParams& hp) const { return n_heads(hp) * hp.head_dim; }
    int64_t kv_dim(const HParams& hp) const { return n_kv_heads * hp.head_dim; }
  };

  // xn: n rows of dim. Row t belongs to kvs[seq_of[t]] at position pos_of[t]; rope_cs holds
  // each row's rotation (rope_angles, n_rot values). Stores the rows' keys and values in the
  // caches and writes att: n rows of the shard's q_dim, the input of attn_output.
  void forward(const HParams& hp, const Heads& heads, const LayerWeights& L, int64_t layer, const float* xn,
               int64_t n, std::span<KVCache* const> kvs, std::span<const int32_t> seq_of,
               std::span<const int64_t> pos_of, const float* rope_cs, float* att, std::vector<uint8_t>& scratch,
               bool batch_invariant);

 private:
  // out = softmax(q·Kᵀ)·V for every row and head, from the caches.
  void attend_heads(const HParams& hp, const Heads& heads, int64_t layer, const float* q, int64_t n,
                    std::span<KVCache* const> kvs, std::span<const int32_t> seq_of, std::span<const int64_t> pos_of,
                    float* out);

  ActivationVector q_, k_, v_;
  std::vector<int64_t> len_of_;  // positions each row sees (pos + 1), for the attention kernel
};

}  // namespace orchard
