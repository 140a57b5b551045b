#pragma once
// Views of a Llama-family model's tensors inside the mapped GGUF file, checked for shape and
// format once at load so the forward pass can trust them.
#include <memory>
#include <string>
#include <vector>

#include "model/hparams.h"
#include "model/shard.h"
#include "tensor/huge_buffer.h"
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
  // Tensor parallel: wo and w_down keep whole quantization blocks around this rank's input
  // columns, which start at these offsets inside them (0 and full width when unsplit).
  int64_t wo_offset = 0, down_offset = 0;
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

  // Small 1-D tensors (norms, biases) stored in F16/BF16 are converted once and kept here.
  std::vector<std::unique_ptr<std::vector<float>>> owned;
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
