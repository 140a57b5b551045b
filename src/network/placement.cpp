#include "network/placement.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "parallel/memory.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

// Prompt compute of a CPU core on quantized products, for machines whose chip the catalog
// does not know and that did not report tflops: only the predicted time to first token uses
// it, never the ranking.
constexpr double kTflopsPerCore = 0.05;

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

parallel::MachineSpec machine_spec(const MachineInfo& m) {
  parallel::MachineSpec s;
  for (const parallel::MachineSpec& known : parallel::Catalog::builtin().machines())
    if (known.id == m.chip) s = known;
  s.id = m.chip.empty() ? m.name : m.chip;
  if (s.name.empty()) s.name = s.id;
  s.mem_bw_gbs = m.mem_bw_gbs;
  s.cores = m.cores;
  s.cpu_cores = std::to_string(m.cores);
  if (m.tflops > 0) s.gpu_tflops = m.tflops;
  else if (s.gpu_tflops <= 0) s.gpu_tflops = kTflopsPerCore * m.cores;
  return s;
}

void scale(parallel::BytesByType& b, double f) {
  for (auto& [type, bytes] : b) bytes *= f;
}

// Lasting reasons this node cannot run the job; the plan when it can.
std::optional<std::string> cannot_run(const JobDemand& job, const NodeView& v, parallel::Prediction& plan,
                                      const parallel::ModelCost* cost) {
  const NodeInfo& n = v.info;
  if (!v.banned.empty()) return "caught by an audit (" + v.banned + ")";
  if (!job.only_node.empty() && n.id != job.only_node) return "the job is for node '" + job.only_node + "' alone";
  if (std::find(job.exclude_owners.begin(), job.exclude_owners.end(), n.owner) != job.exclude_owners.end())
    return "its owner ('" + n.owner + "') is a party to the work this job audits";
  const ModelInfo* model = n.find_model(job.model);
  if (!model) return "does not hold '" + job.model + "'";
  if (!job.model_sha256.empty() && model->sha256 != job.model_sha256)
    return "holds another file under '" + job.model + "' than the one audited";
  if (job.n_ctx > n.max_context)
    return "context " + std::to_string(job.n_ctx) + " exceeds its limit of " + std::to_string(n.max_context);
  parallel::PredictOptions po;
  po.explain = false;
  po.n_ctx = job.n_ctx;
  po.prompt = std::max<int64_t>(1, std::min(job.prompt_tokens, job.n_ctx));
  po.gen = std::max<int64_t>(1, job.max_tokens);
  // Not `cost ? *cost : cost_of(…)`: that expression is a new ModelCost, a copy of *cost
  // (per-layer maps) for every node judged — once most of a placement's time.
  std::optional<parallel::ModelCost> own;
  if (!cost) cost = &own.emplace(cost_of(*model));
  try {
    plan = parallel::choose_plan(*cost, cluster_of(n), po);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Passing reasons it cannot start the job now.
std::optional<std::string> cannot_start(const JobDemand& job, const NodeView& v, const PlacementOptions& o) {
  const int64_t silent = o.now_ms - v.last_heartbeat_ms;
  if (silent > o.heartbeat_timeout_ms)
    return "no heartbeat for " + fmt("%.1f s", static_cast<double>(silent) / 1000) + " (limit " +
           fmt("%.1f s", static_cast<double>(o.heartbeat_timeout_ms) / 1000) + ")";
  if (v.draining || v.info.state.status == NodeStatus::Draining) return std::string("draining (its owner is reclaiming it)");
  // Until the second auditor speaks: a cheater gains nothing more meanwhile, an honest node
  // wronged by the first waits seconds.
  if (v.under_review && !job.verification) return std::string("held: an audit of its work failed and is being confirmed");
  // Until it has shown the memory it claims, placement cannot rely on the claim.
  if (v.proving_memory) return std::string("has not answered the coordinator's memory check yet");
  if (v.info.state.status == NodeStatus::Busy) return std::string("busy");
  if (v.active_jobs >= v.info.max_jobs)
    return "runs " + std::to_string(v.active_jobs) + " job(s), its limit is " + std::to_string(v.info.max_jobs);
  if (v.info.state.load >= 1) return std::string("fully loaded");
  return std::nullopt;
}

}  // namespace

parallel::ClusterSpec cluster_of(const NodeInfo& n) {
  parallel::ClusterSpec c;
  c.name = n.id;
  for (const MachineInfo& m : n.machines) {
    parallel::NodeSpec ns;
    ns.name = m.name;
    ns.machine = machine_spec(m);
    ns.memory_gib = static_cast<double>(m.memory_bytes) / 1073741824.0;
    ns.ranks = 1;
    c.nodes.push_back(std::move(ns));
  }
  if (n.group) {
    parallel::LinkSpec& l = c.link.spec;
    for (const parallel::LinkSpec& known : parallel::Catalog::builtin().links())
      if (known.id == n.group->link) l = known;
    l.id = n.group->link;
    if (l.name.empty()) l.name = l.id;
    if (n.group->latency_us > 0) l.latency_us = n.group->latency_us;
    if (n.group->gbs > 0) l.gbs = n.group->gbs;
    // The measured figure is the whole cable bundle's.
    l.max_cables = 1;
    c.link.cables = 1;
  }
  return c;
}

parallel::ModelCost cost_of(const ModelInfo& m) {
  parallel::ModelCost c = parallel::ModelCost::from_shape(m.shape);
  if (m.file_bytes == 0 || c.bytes <= 0) return c;
  const double f = static_cast<double>(m.file_bytes) / c.bytes;
  for (auto& b : c.layer_bytes) scale(b, f);
  for (auto& b : c.layer_active) scale(b, f);
  scale(c.embed_bytes, f);
  scale(c.head_bytes, f);
  c.bytes = static_cast<double>(m.file_bytes);
  return c;
}

bool PlacementResult::hopeless() const {
  return !choice && std::all_of(rejected.begin(), rejected.end(), [](const Rejection& r) { return r.lasting; });
}

std::string PlacementResult::why_not(const JobDemand& job) const {
  std::string s = "no node can take this job (model '" + job.model + "', context " + std::to_string(job.n_ctx) + "): ";
  if (rejected.empty()) return s + "no node is registered";
  // A network's worth of nodes would make a message nobody reads: the first few, and a count.
  constexpr size_t kNamed = 8;
  for (size_t i = 0; i < rejected.size() && i < kNamed; ++i)
    s += (i ? "; " : "") + std::string("node '") + rejected[i].node_id + "': " + rejected[i].why;
  if (rejected.size() > kNamed) s += "; and " + std::to_string(rejected.size() - kNamed) + " more nodes";
  return s;
}

double model_speed(const NodeInfo& n, const parallel::ModelCost& cost) {
  parallel::PredictOptions po;
  po.explain = false;
  po.n_ctx = 1;
  po.prompt = 1;
  po.gen = 1;
  try {
    return parallel::choose_plan(cost, cluster_of(n), po).tg_tps;
  } catch (const Error&) {
    return -1;
  }
}

Judged judge(const JobDemand& job, const NodeView& v, const PlacementOptions& o, const double* speed,
             const parallel::ModelCost* cost) {
  Judged j;
  Choice c;
  c.node_id = v.info.id;
  if (auto why = cannot_run(job, v, c.plan, cost)) {
    j.rejection = Rejection{v.info.id, *why, true};
    return j;
  }
  if (auto why = cannot_start(job, v, o)) {
    j.rejection = Rejection{v.info.id, *why, false};
    return j;
  }
  c.load = load_of(v);
  if (speed)
    c.speed = *speed;
  else
    c.speed = cost ? model_speed(v.info, *cost) : model_speed(v.info, cost_of(*v.info.find_model(job.model)));
  c.score = score_of(c.speed, v);
  j.choice = std::move(c);
  return j;
}

double score_of(double speed, const NodeView& v) {
  return speed * measured_share(v) * (1 - load_of(v)) * std::clamp(v.reliability, 0.0, 1.0);
}

double load_of(const NodeView& v) {
  // Jobs assigned since the last heartbeat are not in the reported load yet: count them.
  return std::clamp(std::max(v.info.state.load, static_cast<double>(v.active_jobs) / std::max(1, v.info.max_jobs)), 0.0, 1.0);
}

double measured_share(const NodeView& v) {
  // What the node's reported machines predict, no more than a canary measured it deliver.
  return v.speed_ratio ? std::clamp(*v.speed_ratio, 0.0, 1.0) : 1.0;
}

namespace {

bool ranks_before(const Choice& a, const Choice& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.node_id < b.node_id;
}

std::string reason(const Choice& c, const NodeView& v) {
  return "node '" + c.node_id + "' (" + c.plan.candidate.label() + ", " + std::to_string(v.info.machines.size()) +
         " machine(s)): " +
         fmt("speed %.1f tokens/s × measured share %.2f × (1 − load %.2f) × reliability %.2f", c.speed, measured_share(v),
             c.load, v.reliability) +
         fmt(" = %.1f (this job: %.1f tokens/s predicted)", c.score, c.plan.tg_tps);
}

}  // namespace

void BestTwo::offer(Choice c, const NodeView& v) {
  if (!best_ || ranks_before(c, *best_)) {
    next_ = std::move(best_), next_view_ = best_view_;
    best_ = std::move(c), best_view_ = &v;
  } else if (!next_ || ranks_before(c, *next_)) {
    next_ = std::move(c), next_view_ = &v;
  }
}

std::optional<Choice> BestTwo::winner() {
  if (!best_) return std::nullopt;
  best_->reason = reason(*best_, *best_view_);
  if (next_) best_->reason += "; next best " + reason(*next_, *next_view_);
  return std::move(best_);
}

PlacementResult place(const JobDemand& job, const std::vector<NodeView>& nodes, const PlacementOptions& o) {
  PlacementResult r;
  BestTwo best;
  for (const NodeView& v : nodes) {
    Judged j = judge(job, v, o);
    if (j.rejection) r.rejected.push_back(std::move(*j.rejection));
    else best.offer(std::move(*j.choice), v);
  }
  r.choice = best.winner();
  return r;
}

}  // namespace orchard::network
