#pragma once
// The forward pass of every supported family (llama and mixtral, qwen2/qwen2moe, qwen3/qwen3moe,
// deepseek2) over a batch of consecutive tokens, for the whole model or one rank's shard of it
// (a run of layers, a slice of every layer). Each layer is an attention block (grouped-query, or
// latent: blocks/latent_attention.h) and a feed-forward block (dense, or routed experts:
// blocks/moe_ffn.h); the file's hyper-parameters pick them.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/blocks/gqa_attention.h"
#include "model/blocks/latent_attention.h"
#include "model/blocks/moe_ffn.h"
#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/shard.h"
#include "model/weights.h"
#include "tensor/huge_buffer.h"
#include "tensor/ops.h"

namespace orchard {

class GGUFFile;

// One sequence's part of a batch: its next tokens and the cache they extend. Sequences are
// independent (each attends only to its own cache) but share every matrix product.
struct BatchSeq {
  std::span<const int32_t> tokens;
  KVCache* kv;
};

// A batch's rows laid end to end, as the forward passes (local and distributed) take them.
struct BatchRows {
  explicit BatchRows(std::span<const BatchSeq> seqs);  // throws on an empty batch or sequence
  std::vector<int32_t> tokens;
  std::vector<KVCache*> kvs;
  std::vector<int64_t> lengths;
  // Each sequence's last row of x (rows dim wide), one after another, into `out`.
  void last_rows(const float* x, int64_t dim, std::vector<float>& out) const;
};

class Model {
 public:
  // Binds weights inside `file`, which must outlive the model. `repack`: also keep copies of
  // the matrices in this CPU's fastest prompt-processing layout (more memory, faster prompts).
  // `shard`: the part this rank holds; `partial_sum` (required when the shard splits tensors)
  // adds the tensor-parallel partial results up across ranks.
  explicit Model(const GGUFFile& file, bool repack = true, const Shard& shard = Shard{},
                      PartialSum* partial_sum = nullptr);

  const HParams& hparams() const { return hp_; }
  // Batch-invariant results (for serving): every token takes the same kernels whether it runs
  // alone or in a batch of many. Costs single-stream speed where the one-token kernel is faster.
  void set_batch_invariant(bool on) { batch_invariant_ = on; }
  // Called after every MoE layer with its rows' chosen experts and weights (n_expert_used per
  // row, in routing order): for tests and debugging against a reference's routing.
  using RoutingObserver = std::function<void(int64_t layer, const std::vector<int32_t>& experts,
                                             const std::vector<float>& weights)>;
  void set_routing_observer(RoutingObserver f) { routing_observer_ = std::move(f); }
  const ModelWeights& weights() const { return w_; }
  const Shard& shard() const { return w_.shard; }

  // A cache for this shard's layers and KV heads.
  std::unique_ptr<KVCache> new_cache(int64_t n_ctx, KVType type = KVType::F32) const;

  // The whole model: feeds `tokens` at positions kv.size() … kv.size()+n-1 and appends their
  // keys/values to `kv`. `logits` receives n × n_vocab values when all_logits, else only the
  // last token's n_vocab.
  void forward(std::span<const int32_t> tokens, KVCache& kv, std::vector<float>& logits,
               bool all_logits = false);

  // Several sequences in one pass (continuous batching): the rows of all of them go through
  // each weight matrix together, so the weights stream from memory once for the whole batch.
  // `logits` receives one row of n_vocab per sequence: its last token's.
  void forward_batch(std::span<const BatchSeq> seqs, std::vector<float>& logits);

  // The same in pieces, for pipeline stages (x is n × dim, the residual stream):
  void embed(std::span<const int32_t> tokens, float* x) const;           // needs shard().embed
  void run_layers(float* x, int64_t n, KVCache& kv);                      // the shard's layers
  // x holds the sequences' rows one after another (seqs[i].kv, lengths[i] rows each).
  void run_layers(float* x, std::span<KVCache* const> kvs, std::span<const int64_t> lengths);
  // This shard's vocabulary slice of the logits (rows × n_vocab_local), for the last token or
  // all n.
  void project(const float* x, int64_t n, bool all_logits, std::vector<float>& logits);

 private:
  // One layer of each family (families/*.cpp), over the rows set up by run_layers.
  void llama_layer(int64_t layer, float* x, int64_t n, std::span<KVCache* const> kvs);
  void deepseek2_layer(int64_t layer, float* x, int64_t n, std::span<KVCache* const> kvs);
  // x = x + FFN(rmsnorm(x) · ffn_norm), dense or routed experts: what every family ends a layer with.
  void ffn_sublayer(int64_t layer, float* x, int64_t n);
  // y = W·x for a column slice (see LayerWeights::wo_offset): x is placed into zero padding.
  void matmul_cols(const MatrixView& w, int64_t offset, const float* x, int64_t width, int64_t n, float* y);

  HParams hp_;
  ModelWeights w_;
  PartialSum* partial_sum_;
  bool batch_invariant_ = false;
  bool split_heads_ = false, split_ffn_ = false, split_experts_ = false;
  RouterConfig router_;
  RopeYarn yarn_;  // plain rotation unless the file asks for YaRN
  MoeFfn moe_;
  GqaAttention gqa_;
  LatentAttention mla_;
  RoutingObserver routing_observer_;
  // Local sizes: this shard's heads, KV heads and FFN columns.
  int64_t n_heads_, n_kv_heads_, q_dim_, ffn_dim_;
  std::vector<uint8_t> scratch_;
  struct Buffers {
    ActivationVector x, xn, att, proj, gate, up, padded;
    std::vector<float> rope_cs;  // per row: rope_angles at its position, for every layer
  } buf_;
  std::vector<int32_t> seq_of_;
  std::vector<int64_t> pos_of_;
};

}  // namespace orchard
