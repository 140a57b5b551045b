#pragma once
// Architecture hyper-parameters of a model (llama, qwen2, qwen3, their mixture-of-experts
// variants, deepseek2), read from GGUF metadata and checked once so the forward passes can
// trust them.
#include <cstdint>
#include <string>

namespace orchard {

class GGUFFile;

enum class RopeOrder {
  Normal,  // rotate adjacent pairs (x[2i], x[2i+1]) — GGUF `llama`, `deepseek2`
  NeoX,    // rotate halves (x[i], x[i + n_rot/2]) — qwen2, qwen3 and their MoE variants
};

// How router logits become expert scores.
enum class ExpertGating { Softmax, Sigmoid };

struct HParams {
  std::string arch;          // "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "deepseek2"
  std::string name;          // general.name, for display
  int64_t n_vocab = 0;
  int64_t dim = 0;           // embedding_length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;      // key_length (defaults to dim / n_heads)
  int64_t v_head_dim = 0;    // value_length (defaults to head_dim; differs only with latent attention)
  int64_t ffn_dim = 0;       // dense layers' FFN width
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear or YaRN rope scaling: positions multiplied by this
  bool rope_yarn = false;        // YaRN: the blend of interpolated and original angles (tensor/ops.h)
  int64_t yarn_orig_ctx = 0;     // the context the model was trained on before scaling
  float yarn_log_mul = 0.0f;     // deepseek2: attention scale (1 + yarn_log_mul·ln(factor))²/√d
  int64_t n_rot = 0;             // rotated dimensions per head (rope.dimension_count)
  RopeOrder rope_order = RopeOrder::Normal;
  bool attn_bias = false;        // qwen2, qwen2moe: biases on Q, K, V
  bool qk_norm = false;          // qwen3, qwen3moe: RMSNorm over each head of Q and K before RoPE

  // Mixture of experts; n_expert == 0 means every layer is dense.
  int64_t n_expert = 0;           // routed experts per MoE layer
  int64_t n_expert_used = 0;      // experts each token is routed to (top-k)
  int64_t expert_ffn_dim = 0;     // one routed expert's FFN width
  int64_t shared_ffn_dim = 0;     // the shared expert's FFN width (0: none)
  bool shared_gate = false;       // qwen2moe: the shared expert is scaled by sigmoid(gate·x)
  int64_t n_dense_lead = 0;       // leading layers with a dense FFN (deepseek2)
  ExpertGating gating = ExpertGating::Softmax;
  bool expert_weights_norm = false;    // chosen experts' weights divided by their sum
  float expert_weights_scale = 1.0f;   // then multiplied by this
  int64_t n_expert_groups = 0;         // group-limited routing: experts in this many groups …
  int64_t n_group_used = 0;            // … of which this many are kept (0: no group limit)

  // Multi-head latent attention (deepseek2); kv_lora_rank == 0 means ordinary attention.
  int64_t q_lora_rank = 0;        // 0: queries from a plain attn_q
  int64_t kv_lora_rank = 0;       // the compressed latent the cache holds per position

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool mla() const { return kv_lora_rank > 0; }
  bool moe() const { return n_expert > 0; }
  bool moe_layer(int64_t layer) const { return moe() && layer >= n_dense_lead; }
  // Per-head key dims without rotary position (latent attention's "nope" part).
  int64_t head_dim_nope() const { return head_dim - n_rot; }

  // Reads and checks the hyper-parameters; throws orchard::Error naming the missing or bad key.
  static HParams from_gguf(const GGUFFile& file);
};

}  // namespace orchard
