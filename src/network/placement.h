#pragma once
// Where a job goes: a pure function of the job's needs and the nodes as the store sees them.
//
// A job goes whole to one node (one machine, or one cabled group run as one split: pipeline,
// tensor or hybrid, whichever the planner predicts fastest). Machines of different nodes are
// never combined: they share no cable the node vouched for, and one owner reclaiming theirs
// would stall the other's.
//
//   1. Keep the nodes in good standing (no audit caught them) that hold the model, accept the context, and where the planner finds a
//      split whose weights + KV cache for the context fit (parallel::choose_plan) — lasting
//      reasons: retrying later will not help.
//   2. Of those, keep the ones that can start now: heartbeat fresh, not draining or busy, a free
//      job slot, load below 1 — passing reasons.
//   3. Score = speed × measured share × (1 − load) × reliability; the highest wins (ties: the
//      lower node id, so two coordinators agree). Speed is the generation tokens/s the planner
//      predicts for the node on the model at a one-token context: how fast the node is, the
//      same for every job, which lets an index keep the nodes in score order (node_index.h).
//      The job's own plan (its context and lengths) decides whether it fits, and is what the
//      attempt records as predicted (a canary's measured share compares with it).
// A job that no node can ever take (every rejection lasting, or no node at all) is hopeless:
// the store fails it with why_not() rather than let the client wait.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "network/protocol_names.h"
#include "parallel/cluster.h"
#include "parallel/predict.h"

namespace orchard::network {

struct JobDemand {
  std::string model;
  int64_t n_ctx = 4096;         // tokens the KV cache must hold (prompt + generated)
  int64_t prompt_tokens = 512;  // for the predicted time to first token
  int64_t max_tokens = 128;
  // An audit (docs/verification.md): only a node whose file has this SHA-256 (the audited
  // node's), and none of these owners' nodes (the audited node's, an earlier auditor's).
  std::string model_sha256;
  std::vector<std::string> exclude_owners;
  std::string only_node;  // a canary: this node alone
  // An audit or a canary: nodes held while an audit of their own work is confirmed may take
  // it (two held nodes would otherwise wait for each other's confirmation forever).
  bool verification = false;
};

// A node as placement sees it: what it reported and what the store knows about it.
struct NodeView {
  NodeInfo info;
  int64_t last_heartbeat_ms = 0;
  double reliability = 1.0;  // 1 until it abandons jobs (job_store.h)
  bool draining = false;     // its owner is reclaiming it
  int active_jobs = 0;       // attempts it holds now
  std::string banned;        // why an audit caught it (it gets no work); empty: in good standing
  bool under_review = false;  // an audit of its work failed and a second auditor is confirming it
  // Its measured generation speed ÷ the speed its reported machines predict (a canary
  // measured it); placement scores by predicted × min(1, ratio). Unset until measured.
  std::optional<double> speed_ratio;
  std::optional<double> measured_gbs;  // the bandwidth that ratio implies: the price class (unset: laptop)
  bool proving_memory = false;  // a memory challenge (protocol/memory_proof.h) is not answered yet
};

struct PlacementOptions {
  int64_t now_ms = 0;
  int64_t heartbeat_timeout_ms = 30'000;  // older than this: stale, not offered work
};

struct Choice {
  std::string node_id;
  parallel::Prediction plan;  // for this job: its context and lengths
  double speed = 0;   // model_speed(): the node on the model at a one-token context
  double load = 0;    // the load the score used: reported, or its share of job slots in use if higher
  double score = 0;
  std::string reason;  // the plan, its figures, and the runner-up
};

struct Rejection {
  std::string node_id;
  std::string why;
  bool lasting = false;  // true: this node cannot take this job at all; false: not now
};

struct PlacementResult {
  std::optional<Choice> choice;
  std::vector<Rejection> rejected;  // every node not chosen and not eligible, in node order
  bool hopeless() const;
  // "no node can take this job (model 'x', context 8192): node 'a': does not hold 'x'; …"
  std::string why_not(const JobDemand& job) const;
};

PlacementResult place(const JobDemand& job, const std::vector<NodeView>& nodes, const PlacementOptions& o);

// The steps of place(), for an index that looks at a few nodes instead of all (node_index.h).
// One node judged for one job: the choice it would be (score, plan; no reason yet) or why not.
struct Judged {
  std::optional<Choice> choice;
  std::optional<Rejection> rejection;
};
// `speed`: model_speed() of the node on the job's model, `cost`: cost_of() that model, when the
// caller has them already.
Judged judge(const JobDemand& job, const NodeView& v, const PlacementOptions& o, const double* speed = nullptr,
             const parallel::ModelCost* cost = nullptr);
// Tokens/s the node's best plan for the model (`cost`: cost_of() it) makes at a one-token
// context; −1 when not even that fits (no job of this model ever can).
double model_speed(const NodeInfo& n, const parallel::ModelCost& cost);
// speed × measured share × (1 − load) × reliability: the score, computed one way everywhere.
double score_of(double speed, const NodeView& v);
double load_of(const NodeView& v);         // reported load, or its share of job slots in use if higher
double measured_share(const NodeView& v);  // min(1, what a canary measured ÷ predicted); 1 unmeasured
// The winner and the runner-up its reason names, of the choices offered in any order: higher
// score first; ties: the lower node id, so two coordinators agree.
class BestTwo {
 public:
  void offer(Choice c, const NodeView& v);
  const Choice* runner_up() const { return next_ ? &*next_ : nullptr; }
  // The winner, its reason written (its figures and the runner-up's); nullopt if none. Once.
  std::optional<Choice> winner();

 private:
  std::optional<Choice> best_, next_;
  const NodeView *best_view_ = nullptr, *next_view_ = nullptr;
};

// The planner's view of a node: one NodeSpec per machine (one rank each), the group's cable
// between them. A chip the catalog knows brings its efficiencies and compute; the node's own
// memory, bandwidth and cores win over the catalog's.
parallel::ClusterSpec cluster_of(const NodeInfo& n);
// A model's cost from its shape, scaled so its weights add up to the file's bytes when the node
// reported them (the shape says how bytes spread over layers; the file says how many there are).
parallel::ModelCost cost_of(const ModelInfo& m);

}  // namespace orchard::network
