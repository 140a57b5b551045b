#pragma once
// Predicts what one way of splitting a model over a described cluster gives: memory per
// machine, time to first token, generation tokens/s (compute and communication apart), and
// energy. The model (docs/planner.md has the derivation and its validation):
//   generation, per token = Σ over stages [ max over the stage's ranks (bytes read / rate)
//                                          + tensor-parallel syncs (2 all_sums per layer) ]
//                           + a hop between consecutive stages + the sampler's broadcast
//     expert plans: every rank reads its share of attention and the dense layers (split as in
//           tensor parallel where the model has a KV head per rank, else whole), of the shared
//           experts, and the routed experts of the token that it holds; each MoE layer waits for
//           its slowest rank (expected over the routing); all_sums as tensor parallel (or one
//           per MoE layer when attention is whole).
//     rate: measured matrix-vector GB/s for the format and threads (calibrated CPU nodes), or
//           memory bandwidth × the tier's efficiency (catalog machines); ranks running at once
//           on one machine share it.
//   prompt (TTFT) = chunks flowing through the stages: first chunk through every stage, then
//           one slowest-stage time per further chunk; each chunk costs max(FLOPs / compute
//           rate, bytes / streaming rate) plus its syncs and hops.
#include <cmath>
#include <string>
#include <vector>

#include "parallel/cluster.h"
#include "parallel/model_cost.h"
#include "parallel/plan.h"
#include "tensor/attention.h"

namespace orchard::parallel {

struct PredictOptions {
  int64_t n_ctx = 4096;   // context the KV cache is sized for
  int64_t prompt = 512;   // prompt tokens for TTFT
  int64_t gen = 128;      // generated tokens (tokens/s is their mean)
  int64_t chunk = 64;     // prompt tokens per pipeline step
  KVType kv_type = KVType::F32;  // what the KV cache holds
  // false: no Prediction::terms (their formatting was most of a network placement's planning)
  bool explain = true;
  int kv_elem_bytes() const { return static_cast<int>(kv_type_bytes(kv_type)); }
};

struct Candidate {
  Kind kind = Kind::kPipeline;
  int stages = 1, tp = 1;
  int n_nodes = 1;  // uses the cluster's first n_nodes machines, with all their ranks
  int ranks() const { return stages * tp; }
  std::string label() const;  // "single", "pipeline 4", "tensor 2", "hybrid 2×2", "expert 4", "expert 2×2"
};

struct NodeMemory {
  std::string node;
  double need = 0, capacity = 0;
};

struct Prediction {
  Candidate candidate;
  std::vector<std::pair<int64_t, int64_t>> stage_layers;
  std::vector<NodeMemory> memory;
  bool fits = true;
  std::string shortfall;  // why it does not fit
  std::string unsupported;  // why Orchard's engine cannot run this split (other engines can); empty if it can
  double token_s = 0, compute_s = 0, comm_s = 0, tg_tps = 0;
  double exchanged_bytes = 0;  // activations one token sends, summed over every rank
  double ttft_s = 0, ttft_compute_s = 0, ttft_comm_s = 0;
  double joules_per_token = NAN, usd_per_mtok = NAN;  // NaN when a machine's power is unknown
  std::vector<std::string> terms;  // the arithmetic, for --explain
};

// Throws orchard::Error when the candidate cannot exist for this model (more stages than
// layers, more tensor ranks than KV heads) or does not match the cluster's rank count.
Prediction predict(const ModelCost& model, const ClusterSpec& cluster, const Candidate& c, const PredictOptions& o);

// Every split the first k machines allow (k = 1…N; each factorisation of their ranks into
// stages × tensor ranks the model permits, and stages × expert ranks for a mixture of
// experts), best first: plans that fit, by tokens/s.
std::vector<Prediction> rank_plans(const ModelCost& model, const ClusterSpec& cluster, const PredictOptions& o);
// The best plan that fits and that Orchard can run; throws orchard::Error naming the shortfall
// when none does.
Prediction choose_plan(const ModelCost& model, const ClusterSpec& cluster, const PredictOptions& o);

}  // namespace orchard::parallel
