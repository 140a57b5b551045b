#pragma once
// The Llama-family forward pass (llama, qwen2, qwen3) over a batch of consecutive tokens.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace orchard {

class GGUFFile;

class LlamaModel {
 public:
  // Binds weights inside `file`, which must outlive the model. `repack`: also keep copies of
  // the matrices in this CPU's fastest prompt-processing layout (more memory, faster prompts).
  explicit LlamaModel(const GGUFFile& file, bool repack = true);

  const HParams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return w_; }

  // Feeds `tokens` at positions kv.size() … kv.size()+n-1 and appends their keys/values to `kv`.
  // `logits` receives n × n_vocab values when all_logits, else only the last token's n_vocab.
  void forward(std::span<const int32_t> tokens, KVCache& kv, std::vector<float>& logits,
               bool all_logits = false);

 private:
  void attention(int64_t layer, const float* q, int64_t n, int64_t pos0, KVCache& kv, float* out);

  HParams hp_;
  ModelWeights w_;
  std::vector<uint8_t> scratch_;
  struct Buffers {
    std::vector<float> x, xn, q, k, v, att, proj, gate, up;
  } buf_;
};

}  // namespace orchard
