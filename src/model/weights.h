#pragma once
// Views of a model's tensors inside the mapped GGUF file, checked for shape and format once at
// load so the forward passes can trust them.
#include <memory>
#include <string>
#include <vector>

#include "model/hparams.h"
#include "model/shard.h"
#include "tensor/huge_buffer.h"
#include "tensor/level_matrix.h"
#include "tensor/matmul.h"

namespace orchard {

class GGUFFile;

// A feed-forward network down·(silu(gate·x) ⊙ up·x): gate/up ffn × dim, down dim × ffn.
struct FfnWeights {
  MatrixView gate, up, down;
  // A shard's column slice of down keeps whole quantization blocks; its columns start here.
  int64_t down_offset = 0;
};

// Latent attention's weights (deepseek2): queries through q_a/q_b (or a plain wq), keys and
// values from one compressed latent per position that the cache holds.
struct LatentAttentionWeights {
  MatrixView wq_a, wq_b;               // q_lora × dim, q_dim × q_lora (absent: LayerWeights::wq)
  const float* q_a_norm = nullptr;     // [q_lora]
  MatrixView wkv_a;                    // (kv_lora + n_rot) × dim: the latent and the shared RoPE key
  const float* kv_a_norm = nullptr;    // [kv_lora]
  // attn_kv_b (n_heads·(nope + v) × kv_lora) taken apart and absorbed: per head its key rows,
  // through whose transpose a query is moved into the latent space once, and its value rows,
  // applied once to the attention-weighted latent. Kept as the format's integer levels where it
  // has them (per head: k_levels = the nope × kv_lora key rows, v_levels = the transpose of the
  // v × kv_lora value rows, both multiplied as x·M), else as floats in wk_t and wv.
  std::vector<LevelMatrix> k_levels, v_levels;
  MatrixView wk_t, wv;                 // F32: key rows transposed (kv_lora × nope) and value rows
                                       // (v × kv_lora); head h's matrix starts h·rows·cols floats in
  DType kv_b_type = DType::F32;        // the latent is rounded as llama.cpp rounds it for kv_b
};

// A mixture-of-experts FFN: a router, the routed experts and optionally a shared expert.
struct MoeWeights {
  MatrixView router;                   // n_expert × dim
  const float* selection_bias = nullptr;  // exp_probs_b [n_expert]: shifts selection, not weights
  std::vector<MatrixView> gate, up, down; // per expert held: slices of the 3-D ffn_*_exps tensors
  int64_t first_expert = 0;            // expert id of gate[0] (expert parallel: a rank's range)
  int64_t down_offset = 0;             // tensor parallel: where each down's columns start (matmul_cols)
  FfnWeights shared;                   // absent (no data) when the model has none
  MatrixView shared_gate;              // qwen2moe: 1 × dim, the shared expert's sigmoid gate
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [dim]
  MatrixView wq, wk, wv, wo;         // wq: q_dim × dim, wk/wv: kv_dim × dim, wo: dim × (n_heads·v_dim)
  LatentAttentionWeights mla;        // deepseek2 (then wk and wv are absent)
  MoeWeights moe;                    // MoE layers (then w_gate, w_up, w_down are absent)
  const float* bq = nullptr;         // qwen2 biases (nullptr elsewhere)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;     // qwen3: [head_dim]
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;   // [dim]
  MatrixView w_gate, w_up, w_down;   // gate/up: ffn × dim, down: dim × ffn
  // Tensor parallel: wo and w_down keep whole quantization blocks around this rank's input
  // columns, which start at these offsets inside them (0 and full width when unsplit).
  int64_t wo_offset = 0, down_offset = 0;
  bool is_moe() const { return !moe.gate.empty(); }
};

struct ModelWeights {
  MatrixView tok_embd;               // n_vocab × dim
  const float* output_norm = nullptr;
  MatrixView output;                 // n_vocab × dim (tok_embd when tied)
  const float* rope_freqs = nullptr; // llama3 frequency factors [n_rot / 2], or nullptr
  std::vector<LayerWeights> layers;  // the shard's layers, first to last
  Shard shard;                       // resolved: what these weights cover

  // Binds every tensor the shard needs (all of them by default); throws orchard::Error naming
  // the tensor when one is missing, has the wrong shape, or is stored in a format Orchard
  // cannot compute with. Row ranges are views into the file; column ranges are copies.
  static ModelWeights bind(const GGUFFile& file, const HParams& hp, const Shard& shard = Shard{});

  // Small 1-D tensors (norms, biases) and latent attention's absorbed matrices (as floats where
  // attn_kv_b's format has no integer levels), converted once and kept here.
  std::vector<std::unique_ptr<std::vector<float>>> owned;
  std::vector<std::unique_ptr<LevelStore>> owned_levels;  // latent attention's k_levels, v_levels
  // The file byte ranges bind() reads for `shard`: what a rank must load.
  static std::vector<std::pair<uint64_t, uint64_t>> byte_ranges(const GGUFFile& file, const HParams& hp,
                                                                const Shard& shard);

  // Column slices of matrices (tensor parallel), copied out of the file.
  std::vector<std::unique_ptr<HugeBuffer>> sliced;
  // Matrices repacked into this CPU's faster layout (see pack_for_cpu), all in one buffer.
  std::vector<std::unique_ptr<HugeBuffer>> packed;

  // Repacks every matrix that has a faster layout on this CPU. Where matmul then reads only
  // the packed copy (pack_replaces_original), gives the original back — its pages of `file`'s
  // copy, or its column slice — so memory stays one copy; the file's pages go back each time
  // `release_every` bytes of it are packed, so loading never holds much more than one copy.
  void pack_for_cpu(const GGUFFile* file, size_t release_every = size_t{128} << 20);
};

}  // namespace orchard
