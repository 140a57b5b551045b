#pragma once
// Views of a Llama-family model's tensors inside the mapped GGUF file, checked for shape and
// format once at load so the forward pass can trust them.
#include <memory>
#include <string>
#include <vector>

#include "model/hparams.h"
#include "tensor/matmul.h"

namespace orchard {

class GGUFFile;

struct LayerWeights {
  const float* attn_norm = nullptr;  // [dim]
  MatrixView wq, wk, wv, wo;         // wq: q_dim × dim, wk/wv: kv_dim × dim, wo: dim × q_dim
  const float* bq = nullptr;         // qwen2 biases (nullptr elsewhere)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;     // qwen3: [head_dim]
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;   // [dim]
  MatrixView w_gate, w_up, w_down;   // gate/up: ffn × dim, down: dim × ffn
};

struct ModelWeights {
  MatrixView tok_embd;               // n_vocab × dim
  const float* output_norm = nullptr;
  MatrixView output;                 // n_vocab × dim (tok_embd when tied)
  const float* rope_freqs = nullptr; // llama3 frequency factors [n_rot / 2], or nullptr
  std::vector<LayerWeights> layers;

  // Binds every tensor the architecture needs; throws orchard::Error naming the tensor when one
  // is missing, has the wrong shape, or is stored in a format Orchard cannot compute with.
  static ModelWeights bind(const GGUFFile& file, const HParams& hp);

  // Small 1-D tensors (norms, biases) stored in F16/BF16 are converted once and kept here.
  std::vector<std::unique_ptr<std::vector<float>>> owned;
  // Matrices repacked for this CPU's prompt-processing kernel (see pack_for_cpu).
  std::vector<std::vector<uint8_t>> packed;

  // Repacks every matrix that has a faster many-token layout on this CPU.
  void pack_for_cpu();
};

}  // namespace orchard
