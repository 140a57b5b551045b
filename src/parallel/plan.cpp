#include "parallel/plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/error.h"

namespace orchard::parallel {

Kind parse_kind(const std::string& text) {
  if (text == "pipeline") return Kind::kPipeline;
  if (text == "tensor") return Kind::kTensor;
  if (text == "hybrid") return Kind::kHybrid;
  if (text == "expert") return Kind::kExpert;
  throw Error("--parallel must be auto, pipeline, tensor, hybrid or expert, not '" + text + "'");
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPipeline: return "pipeline";
    case Kind::kTensor: return "tensor";
    case Kind::kHybrid: return "hybrid";
    case Kind::kExpert: return "expert";
  }
  return "?";
}

std::vector<std::pair<int64_t, int64_t>> split_range(int64_t n, int parts, int64_t unit,
                                                     const std::vector<double>& weights) {
  std::vector<double> w = weights;
  if (w.empty()) w.assign(static_cast<size_t>(parts), 1.0);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const int64_t units = (n + unit - 1) / unit;
  // Cumulative share, rounded to whole units; every part keeps at least one unit.
  std::vector<std::pair<int64_t, int64_t>> out;
  double acc = 0;
  int64_t prev = 0;
  for (int p = 0; p < parts; ++p) {
    acc += w[static_cast<size_t>(p)];
    int64_t end_units = p + 1 == parts ? units : static_cast<int64_t>(std::llround(acc / total * units));
    end_units = std::max(end_units, prev + 1);
    end_units = std::min(end_units, units - (parts - 1 - p));
    out.emplace_back(prev * unit, std::min(n, end_units * unit));
    prev = end_units;
  }
  return out;
}

Plan make_plan(const HParams& hp, Kind kind, int ranks, int tp, const std::vector<double>& weights,
               const std::vector<double>& group_weights, bool whole_attention) {
  Plan plan;
  plan.kind = kind;
  if (ranks < 1) throw Error("a plan needs at least one rank");
  if (kind == Kind::kPipeline) {
    plan.stages = ranks;
    plan.tp = 1;
  } else if (kind == Kind::kTensor) {
    plan.stages = 1;
    plan.tp = ranks;
  } else if (kind == Kind::kExpert) {
    if (!hp.moe()) throw Error("expert parallel needs a model with experts; " + hp.name + " (" + hp.arch + ") has none");
    if (tp < 1) tp = ranks;
    if (ranks % tp != 0)
      throw Error("expert: " + std::to_string(ranks) + " ranks do not form stages of " + std::to_string(tp) +
                  " expert-parallel ranks");
    if (tp > hp.n_expert)
      throw Error("expert parallel over " + std::to_string(tp) + " ranks needs at least as many experts; the model has " +
                  std::to_string(hp.n_expert));
    plan.tp = tp;
    plan.stages = ranks / tp;
  } else {
    if (tp < 1) tp = ranks % 2 == 0 ? 2 : 1;
    if (ranks % tp != 0)
      throw Error("hybrid: " + std::to_string(ranks) + " ranks do not form stages of " + std::to_string(tp) +
                  " tensor-parallel ranks");
    plan.tp = tp;
    plan.stages = ranks / tp;
  }
  if (plan.stages > hp.n_layers)
    throw Error("pipeline of " + std::to_string(plan.stages) + " stages needs at least as many layers; the model has " +
                std::to_string(hp.n_layers));
  if (!group_weights.empty() && static_cast<int>(group_weights.size()) != plan.tp)
    throw Error("got " + std::to_string(group_weights.size()) + " memory weights for groups of " +
                std::to_string(plan.tp) + " ranks");
  const bool expert = kind == Kind::kExpert;
  if (!expert && plan.tp > hp.n_kv_heads)
    throw Error("tensor parallel over " + std::to_string(plan.tp) + " ranks needs at least " +
                std::to_string(plan.tp) + " KV heads; the model has " + std::to_string(hp.n_kv_heads));
  if (!weights.empty() && static_cast<int>(weights.size()) != plan.stages)
    throw Error("got " + std::to_string(weights.size()) + " memory weights for " + std::to_string(plan.stages) +
                " stages");
  const auto layers = split_range(hp.n_layers, plan.stages, 1, weights);
  // Expert plans split attention and the dense FFNs as tensor parallel does where the model has
  // a KV head per rank (unless asked to keep them whole): otherwise every rank of the group
  // repeats them, and with a token's few experts spread thin they would be most of its time.
  plan.whole_attention = expert && (whole_attention || plan.tp > hp.n_kv_heads);
  const int split = plan.whole_attention ? 1 : plan.tp;
  const auto heads = split_range(hp.n_kv_heads, split);
  // FFN columns in steps of 32 so Q4_0/Q8_0 column slices need no padding; vocabulary in rows.
  const int64_t ffn_unit = hp.ffn_dim % 32 == 0 && hp.ffn_dim / 32 >= plan.tp ? 32 : 1;
  const auto ffn = split_range(hp.ffn_dim, split, ffn_unit);
  const auto vocab = split_range(hp.n_vocab, plan.tp);
  const auto experts = expert ? split_range(hp.n_expert, plan.tp, 1, group_weights) : decltype(vocab){};
  // The shared experts' columns in whole blocks of 32 (a cut block is rounded apart by each rank
  // and the sum no longer matches one rank's: deepseek2's 64-wide shared expert over 3 ranks
  // changed greedy tokens); with fewer blocks than ranks the last ranks hold none.
  std::vector<std::pair<int64_t, int64_t>> shexp;
  if ((expert || plan.tp > 1) && hp.shared_ffn_dim > 0) {
    const int64_t blocks = hp.shared_ffn_dim % 32 == 0 ? hp.shared_ffn_dim / 32 : 0;
    if (blocks == 0) {
      shexp = split_range(hp.shared_ffn_dim, std::min<int64_t>(plan.tp, hp.shared_ffn_dim));
    } else {
      shexp = split_range(hp.shared_ffn_dim, static_cast<int>(std::min<int64_t>(plan.tp, blocks)), 32);
    }
    shexp.resize(static_cast<size_t>(plan.tp), {0, 0});  // {0, 0}: none
  }
  // Tensor plans on a mixture split every routed expert's FFN columns as a dense FFN's (in blocks
  // of 32 where they allow it): a token's experts then cost each rank the same share, where
  // whole experts leave the layer waiting on the rank that most of them landed on.
  std::vector<std::pair<int64_t, int64_t>> expert_ffn;
  if (!expert && plan.tp > 1 && hp.moe()) {
    const int64_t f = hp.expert_ffn_dim;
    expert_ffn = split_range(f, plan.tp, f % 32 == 0 && f / 32 >= plan.tp ? 32 : 1);
  }
  for (int s = 0; s < plan.stages; ++s)
    for (int t = 0; t < plan.tp; ++t) {
      RankRole role;
      role.stage = s;
      role.tp_rank = t;
      Shard& sh = role.shard;
      sh.layer_begin = layers[static_cast<size_t>(s)].first;
      sh.layer_end = layers[static_cast<size_t>(s)].second;
      sh.embed = s == 0;
      sh.head = s == plan.stages - 1;
      if (expert) {
        sh.expert_begin = experts[static_cast<size_t>(t)].first;
        sh.expert_end = experts[static_cast<size_t>(t)].second;
      }
      if (!expert_ffn.empty()) {
        sh.expert_ffn_begin = expert_ffn[static_cast<size_t>(t)].first;
        sh.expert_ffn_end = expert_ffn[static_cast<size_t>(t)].second;
      }
      if (!shexp.empty()) {
        sh.shexp_begin = shexp[static_cast<size_t>(t)].first;
        sh.shexp_end = shexp[static_cast<size_t>(t)].second;
      }
      if (split > 1) {
        sh.kv_head_begin = heads[static_cast<size_t>(t)].first;
        sh.kv_head_end = heads[static_cast<size_t>(t)].second;
        sh.ffn_begin = ffn[static_cast<size_t>(t)].first;
        sh.ffn_end = ffn[static_cast<size_t>(t)].second;
      }
      sh.vocab_begin = vocab[static_cast<size_t>(t)].first;
      sh.vocab_end = vocab[static_cast<size_t>(t)].second;
      plan.ranks.push_back(role);
    }
  return plan;
}

std::string Plan::describe() const {
  std::string d = std::string(kind_name(kind)) + ": " + std::to_string(stages) + " stage(s) × " + std::to_string(tp) +
                  (kind != Kind::kExpert ? " tensor-parallel rank(s)\n"
                   : whole_attention     ? " expert-parallel rank(s), attention whole on each\n"
                                         : " expert-parallel rank(s), attention split\n");
  for (size_t r = 0; r < ranks.size(); ++r)
    d += "  rank " + std::to_string(r) + ": stage " + std::to_string(ranks[r].stage) + ", " +
         ranks[r].shard.describe() + "\n";
  return d;
}

}  // namespace orchard::parallel
