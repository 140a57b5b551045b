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
};

// Known shapes: "llama-2-7b", "llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "deepseek-v3",
// "kimi-k2", "qwen3-235b-a22b", … or a size ("70B", "7e9"): a dense Llama-shaped model of
// that many parameters. Throws orchard::Error listing the names for an unknown one.
ModelSpec model_spec(const std::string& name_or_size, DType type);
std::vector<std::string> known_model_specs();

struct ModelCost {
  std::string name, arch;
  int64_t n_layers = 0, dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_dim = 0, n_vocab = 0;
  int64_t n_experts = 0, n_experts_used = 0;
  int64_t n_ctx_train = 0;
  // Elements one token adds to the KV cache in one layer (K and V together).
  int64_t kv_elems_per_layer = 0;

  uint64_t params = 0;         // every weight
  uint64_t active_params = 0;  // weights a token uses (experts counted by use)
  double bytes = 0;            // every weight's bytes
  std::vector<BytesByType> layer_bytes;   // held, per layer
  std::vector<BytesByType> layer_active;  // read per generated token, per layer
  std::vector<uint64_t> layer_params, layer_active_params;
  BytesByType embed_bytes;  // token embeddings (one row read per token)
  BytesByType head_bytes;   // output norm and output matrix (read whole per token)
  bool tied = false;        // the output matrix is the embedding matrix
  uint64_t head_params = 0;

  // Bytes a rank holding layers [begin, end) (split tp ways) keeps, embeddings and head as asked.
  double held_bytes(int64_t begin, int64_t end, int tp, bool embed, bool head) const;
  // Bytes streamed per generated token by such a rank.
  BytesByType read_per_token(int64_t begin, int64_t end, int tp, bool head) const;
  // KV cache bytes for `n_ctx` tokens of layers [begin, end), split tp ways (entries of
  // elem_bytes: 4 for f32, 2 for f16).
  double kv_bytes(int64_t begin, int64_t end, int tp, int64_t n_ctx, int elem_bytes = 4) const;
  // Multiply-adds ×2 for one token at position `pos` in layers [begin, end): the matrices a
  // token uses plus attention over the cached positions.
  double flops_per_token(int64_t begin, int64_t end, int64_t pos, bool head) const;

  static ModelCost from_gguf(const GGUFFile& file);
  static ModelCost from_shape(const ModelSpec& shape);
  std::string summary() const;
};

}  // namespace orchard::parallel
