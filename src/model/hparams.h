#pragma once
// Architecture hyper-parameters of a Llama-family model, read from GGUF metadata.
#include <cstdint>
#include <string>

namespace orchard {

class GGUFFile;

enum class RopeOrder {
  Normal,  // rotate adjacent pairs (x[2i], x[2i+1]) — GGUF `llama` (converter pre-permutes Q/K)
  NeoX,    // rotate halves (x[i], x[i + n_rot/2]) — qwen2, qwen3
};

struct HParams {
  std::string arch;          // "llama", "qwen2", "qwen3"
  std::string name;          // general.name, for display
  int64_t n_vocab = 0;
  int64_t dim = 0;           // embedding_length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;      // key_length (defaults to dim / n_heads)
  int64_t ffn_dim = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear rope scaling: positions multiplied by this
  int64_t n_rot = 0;             // rotated dimensions per head (rope.dimension_count)
  RopeOrder rope_order = RopeOrder::Normal;
  bool attn_bias = false;        // qwen2: biases on Q, K, V
  bool qk_norm = false;          // qwen3: RMSNorm over each head of Q and K before RoPE

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Reads and checks the hyper-parameters; throws orchard::Error naming the missing or bad key.
  static HParams from_gguf(const GGUFFile& file);
};

}  // namespace orchard
