#pragma once
// Which part of a model one rank holds. A pipeline stage holds a run of layers (the first
// also the embeddings, the last the output head); a tensor-parallel rank holds, in each of
// those layers, a range of KV heads with their query heads, a range of FFN columns, and a
// range of vocabulary rows of the output head. Latent attention splits by query heads (its
// file's KV heads are its query heads). The default holds everything.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/hparams.h"

namespace orchard {

struct Shard {
  int64_t layer_begin = 0, layer_end = -1;      // [begin, end); -1: to the last layer
  bool embed = true;                            // token embeddings (first stage)
  bool head = true;                             // output norm and output matrix (last stage)
  int64_t kv_head_begin = 0, kv_head_end = -1;  // query heads follow their KV heads
  int64_t ffn_begin = 0, ffn_end = -1;
  int64_t vocab_begin = 0, vocab_end = -1;
  // Expert parallel: the routed experts of every MoE layer this rank holds, and its FFN columns
  // of the shared expert (split like a dense FFN's).
  int64_t expert_begin = 0, expert_end = -1;
  int64_t shexp_begin = 0, shexp_end = -1;
  // Tensor parallel on a mixture: the FFN columns this rank holds of every routed expert it holds,
  // so a token's experts cost every rank the same whatever the routing.
  int64_t expert_ffn_begin = 0, expert_ffn_end = -1;

  // -1 ends replaced by the model's sizes; throws orchard::Error on an empty or bad range.
  Shard resolved(const HParams& hp) const;
  int64_t n_layers() const { return layer_end - layer_begin; }
  int64_t n_kv_heads() const { return kv_head_end - kv_head_begin; }
  int64_t n_ffn() const { return ffn_end - ffn_begin; }
  int64_t n_vocab() const { return vocab_end - vocab_begin; }
  int64_t n_experts() const { return expert_end - expert_begin; }
  int64_t n_shexp() const { return shexp_end - shexp_begin; }
  int64_t n_expert_ffn() const { return expert_ffn_end - expert_ffn_begin; }
  // True when heads, FFN, experts or vocabulary are split (the rank needs its peers' partial sums).
  bool splits_tensors(const HParams& hp) const;
  std::string describe() const;
};

// Adds up partial results across the tensor-parallel ranks of a layer, in f32 and in a fixed
// order so every rank gets the same bits. The parallel layer implements it over a Group.
class PartialSum {
 public:
  virtual ~PartialSum() = default;
  virtual void sum(float* data, size_t n) = 0;
};

}  // namespace orchard
