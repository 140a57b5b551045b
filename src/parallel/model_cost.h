#pragma once
// What a model costs to hold and to run, read from a GGUF header alone (tensor shapes and
// types, no weights) or built from a described shape (for models not on disk, e.g. a 1 T
// mixture-of-experts model in a "what if" plan). The planner's inputs:
//   bytes held per layer            → memory per machine and pipeline stage sizes
//   bytes read per generated token  → generation time (memory-bandwidth bound)
//   FLOPs per token                 → prompt-processing time (compute bound)
//   KV-cache bytes per token        → memory for the context
//   activation bytes exchanged      → communication time of each split
// Mixture-of-experts layers count only the experts a token uses as read per token.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensor/types.h"

namespace orchard {
class GGUFFile;
}

namespace orchard::parallel {

// Bytes of weights by storage format (kernels stream each format at its own rate).
using BytesByType = std::map<DType, double>;
double total(const BytesByType& b);

// A model's shape where no file is at hand. Dense Llama-family unless n_experts > 0.
struct ModelSpec {
  std::string name;
  int64_t n_layers = 0, dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_dim = 0, n_vocab = 0;
  bool tied_embeddings = false;
  // Mixture of experts: layers from n_dense_layers on route each token to n_experts_used of
  // n_experts experts of expert_ffn_dim each, plus n_shared_experts always used.
  int64_t n_experts = 0, n_experts_used = 0, n_shared_experts = 0, expert_ffn_dim = 0, n_dense_layers = 0;
  // Multi-head latent attention (DeepSeek V3, Kimi K2): low-rank Q and KV; the cache holds the
  // compressed KV (kv_lora_rank + rope_dim per token per layer).
  int64_t q_lora_rank = 0, kv_lora_rank = 0, rope_dim = 0, nope_dim = 0, v_head_dim = 0;
  DType type = DType::Q4_0;  // weight format of the large matrices (norms stay F32)
  // A checkpoint published in mixed formats keeps everything but the routed experts in this
  // one whatever `type` says (Kimi K2 Thinking: int4 experts, the rest BF16).
  std::optional<DType> non_expert_type;
};

// Known shapes: "llama-2-7b", "llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "deepseek-v3",
// "kimi-k2", "kimi-k2-thinking", "qwen3-235b-a22b", "moe-816b", … or a size ("70B", "7e9"): a dense Llama-shaped model of
// that many parameters. Throws orchard::Error listing the names for an unknown one.
ModelSpec model_spec(const std::string& name_or_size, DType type);
std::vector<std::string> known_model_specs();

struct ModelCost {
  std::string name, arch;
  int64_t n_layers = 0, dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_dim = 0, n_vocab = 0;
  int64_t n_experts = 0, n_experts_used = 0;
  bool mla = false;  // latent attention: every head reads the one cached latent, so a rank holding
                     // some of the heads still keeps the whole cache
  int64_t n_ctx_train = 0;
  // Elements one token adds to the KV cache in one layer (K and V together).
  int64_t kv_elems_per_layer = 0;

  uint64_t params = 0;         // every weight
  uint64_t active_params = 0;  // weights a token uses (experts counted by use)
  double bytes = 0;            // every weight's bytes
  std::vector<BytesByType> layer_bytes;   // held, per layer
  std::vector<BytesByType> layer_active;  // read per generated token, per layer
  std::vector<uint64_t> layer_params, layer_active_params;
  // Mixture-of-experts layers, apart (empty maps for dense layers): every routed expert, held
  // (a token reads n_experts_used / n_experts of it), and the shared experts, read whole.
  std::vector<BytesByType> layer_experts, layer_shared;
  std::vector<uint64_t> layer_expert_params, layer_shared_params;
  BytesByType embed_bytes;  // token embeddings (one row read per token)
  BytesByType head_bytes;   // output norm and output matrix (read whole per token)
  bool tied = false;        // the output matrix is the embedding matrix
  uint64_t head_params = 0;

  // Bytes a rank holding layers [begin, end) (split tp ways) keeps, embeddings and head as asked.
  double held_bytes(int64_t begin, int64_t end, int tp, bool embed, bool head) const;
  // Bytes streamed per generated token by such a rank.
  BytesByType read_per_token(int64_t begin, int64_t end, int tp, bool head) const;
  // Expert parallel: a rank of a group of `group` that holds routed experts [e0, e1) of layers
  // [begin, end), 1/split of attention and the dense layers (split 1: whole), 1/group of the
  // shared experts' columns, and a 1/group slice of the vocabulary on the last stage.
  double expert_held_bytes(int64_t begin, int64_t end, int64_t e0, int64_t e1, int group, int split, bool embed,
                           bool head) const;
  // What every rank of an expert group reads per token in layer l: the layer's active bytes
  // without its routed and shared experts.
  BytesByType replicated_read(int64_t l) const;
  bool moe_layer(int64_t l) const { return !layer_experts[static_cast<size_t>(l)].empty(); }
  int64_t moe_layers(int64_t begin, int64_t end) const;
  // Bytes a chunk of `tokens` prompt tokens streams in layers [begin, end) split tp ways:
  // the routed experts any of them picks (1 − (1 − used/n)^tokens of each), the rest once.
  BytesByType read_per_chunk(int64_t begin, int64_t end, int tp, int64_t tokens) const;
  // KV cache bytes for `n_ctx` tokens of layers [begin, end), split tp ways (entries of
  // elem_bytes: 4 for f32, 2 for f16).
  double kv_bytes(int64_t begin, int64_t end, int tp, int64_t n_ctx, int elem_bytes = 4) const;
  // Multiply-adds ×2 for one token at position `pos` in layers [begin, end): the matrices a
  // token uses plus attention over the cached positions.
  double flops_per_token(int64_t begin, int64_t end, int64_t pos, bool head) const;

  // Attention FLOPs per cached position per layer (scores and weighted sum, all heads).
  double attn_flops_per_pos = 0;

  static ModelCost from_gguf(const GGUFFile& file);
  static ModelCost from_shape(const ModelSpec& shape);
  std::string summary() const;
};

// Expected time of the slowest rank of an expert group for one token in one MoE layer. Rank t
// holds held[t] of the layer's experts and takes fixed[t] + c_t × per_expert[t] seconds, where
// c_t of the token's `used` experts land on it; the router is taken to pick `used` distinct
// experts uniformly (what load balancing aims at), so (c_t) is multivariate hypergeometric.
double expected_slowest(const std::vector<int64_t>& held, int64_t used, const std::vector<double>& fixed,
                        const std::vector<double>& per_expert);

}  // namespace orchard::parallel
