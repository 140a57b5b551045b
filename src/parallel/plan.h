#pragma once
// Who holds what: a plan gives every rank of a job its pipeline stage, its place in that
// stage's tensor-parallel group, and the Shard of the model it loads.
//   pipeline P:   P stages of consecutive layers, sized in proportion to each stage's memory
//   tensor T:     one stage; every layer's heads, FFN columns and vocabulary split T ways
//   hybrid P×T:   P stages, each a tensor-parallel group of T ranks (rank = stage·T + t)
//   expert P×E:   P stages (1 by default), each an expert-parallel group of E ranks: every MoE
//                 layer's routed experts split E ways (in proportion to memory weights), the
//                 shared experts' columns, attention heads and dense FFNs split as tensor
//                 parallel splits them (or kept whole on each rank: whole_attention), the
//                 vocabulary split
// In a group, the ranks' partial outputs are summed by the group's fixed-order all_sum.
#include <cstdint>
#include <string>
#include <vector>

#include "model/hparams.h"
#include "model/shard.h"

namespace orchard::parallel {

enum class Kind { kPipeline, kTensor, kHybrid, kExpert };

Kind parse_kind(const std::string& text);
const char* kind_name(Kind k);

struct RankRole {
  int stage = 0;
  int tp_rank = 0;
  Shard shard;
};

struct Plan {
  Kind kind = Kind::kPipeline;
  int stages = 1;
  int tp = 1;
  bool whole_attention = false;  // expert plans: attention and dense FFNs repeated on every rank
  std::vector<RankRole> ranks;   // by world rank

  int size() const { return stages * tp; }
  int world_rank(int stage, int tp_rank) const { return stage * tp + tp_rank; }
  // The rank that samples: the first rank of the last stage.
  int sampler() const { return world_rank(stages - 1, 0); }
  std::string describe() const;
};

// `weights[s]`: relative memory of stage s (equal when empty); every stage gets at least one
// layer. Throws orchard::Error when the plan cannot exist (more stages than layers, more
// tensor ranks than KV heads, …), saying why.
// `group_weights[t]`: relative memory of the t-th rank of each group (expert plans: the share of
// the experts it holds; equal when empty). `whole_attention`: expert plans keep attention and
// the dense FFNs whole on every rank (as they also do when the model has fewer KV heads than
// the group has ranks); the tokens then match a single rank's more closely, at the cost of
// every rank repeating that work.
Plan make_plan(const HParams& hp, Kind kind, int ranks, int tp = 0, const std::vector<double>& weights = {},
               const std::vector<double>& group_weights = {}, bool whole_attention = false);

// Splits [0, n) into `parts` contiguous ranges whose lengths follow `weights` (equal when
// empty), each at least `min_len` and a multiple of `unit` except the last.
std::vector<std::pair<int64_t, int64_t>> split_range(int64_t n, int parts, int64_t unit = 1,
                                                     const std::vector<double>& weights = {});

}  // namespace orchard::parallel
