#pragma once
// One rank's side of a model split by a Plan. Every rank calls feed() with the same tokens:
// stage 0 embeds them, each stage runs its layers and sends the activations to the same
// tensor-parallel rank of the next stage, and the last stage computes its slice of the
// vocabulary; the sampler gathers the whole row of logits. A long prompt goes in chunks, so
// stage 0 computes chunk c+1 while stage 1 computes chunk c (pipelined prefill).
#include <memory>
#include <vector>

#include "dist/group.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/plan.h"

namespace orchard::parallel {

// Tensor-parallel partial sums over a group: f32, summed in a fixed order by the backend, so
// the result does not depend on which rank computed which part.
class GroupPartialSum : public PartialSum {
 public:
  explicit GroupPartialSum(dist::Group* group) : group_(group) {}
  void set_group(dist::Group* group) { group_ = group; }
  void sum(float* data, size_t n) override {
    if (group_ && group_->size() > 1) group_->all_sum(data, n);
  }

 private:
  dist::Group* group_;
};

class DistributedForward : public Forward {
 public:
  // `tp_group`: this rank's stage group (from world.split(stage, tp_rank)); `chunk`: prompt
  // tokens per pipeline step.
  DistributedForward(Model& model, KVCache& kv, dist::Group& world, dist::Group* tp_group, const Plan& plan,
                     int64_t chunk = 64);
  void feed(std::span<const TokenId> tokens, std::vector<float>& logits) override;
  // Several sequences in one pass through every stage (continuous batching), each with its own
  // cache (this forward's own is not used); the sampler's `logits` gets one row of n_vocab per
  // sequence. No chunking: callers keep the rows few (decode steps, short prompt pieces).
  void feed_batch(std::span<const BatchSeq> seqs, std::vector<float>& logits);
  int64_t positions() const override { return kv_.size(); }
  int64_t capacity() const override { return kv_.capacity(); }
  bool is_sampler() const override { return world_.rank() == plan_.sampler(); }
  TokenId agree(TokenId decision) override;

 private:
  // The sampler's full rows from the tensor ranks' vocabulary slices (local_: rows × slice).
  void gather_logits(std::vector<float>& logits, int64_t rows = 1);

  Model& model_;
  KVCache& kv_;
  dist::Group& world_;
  dist::Group* tp_;
  const Plan& plan_;
  RankRole role_;
  int64_t chunk_;
  std::vector<float> x_, local_, padded_, all_;
};

}  // namespace orchard::parallel
