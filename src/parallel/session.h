#pragma once
// One rank's part of a model split across a job: reads the plan, loads only this rank's
// shard, forms its tensor-parallel group, and generates in step with the other ranks. The CLI,
// the HTTP server and the node agent drive it the same way.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/group.h"
#include "model/engine.h"
#include "parallel/distributed_forward.h"
#include "parallel/plan.h"

namespace orchard::parallel {

struct SessionOptions {
  EngineOptions engine;               // model path, threads, context (shard is filled in)
  Kind kind = Kind::kPipeline;
  bool choose = false;                // let the planner pick kind and tp (see auto_plan.h)
  int tp = 0;                         // hybrid: tensor-parallel ranks per stage
  bool whole_attention = false;       // expert: attention and dense FFNs whole on every rank
  std::vector<uint64_t> mem;          // per-rank memory budgets in bytes (empty: unlimited)
  int64_t chunk = 64;                 // prompt tokens per pipeline step
};

class Session {
 public:
  // Collective over `world`. Throws orchard::Error, the same on every rank, when the plan is
  // impossible or does not fit the memory budgets (naming sizes and budgets).
  static std::unique_ptr<Session> start(dist::Group& world, const SessionOptions& options);

  const Plan& plan() const { return plan_; }
  // Why this plan, when the planner chose it (empty otherwise; rank 0 only).
  const std::string& plan_note() const { return note_; }
  Engine& engine() { return *engine_; }
  bool is_sampler() const { return world_.rank() == plan_.sampler(); }
  // A forward pass over this rank's shard, in step with the others, writing into `kv`.
  std::unique_ptr<DistributedForward> make_forward(KVCache& kv);
  // Every rank calls it; the sampler's result holds the text and only it calls on_text.
  GenerateResult generate(const std::string& prompt, const GenerateOptions& options,
                          const std::function<bool(const std::string&)>& on_text = {});

 private:
  Session(dist::Group& world) : world_(world), sum_(nullptr) {}
  dist::Group& world_;
  Plan plan_;
  std::unique_ptr<dist::Group> tp_;
  GroupPartialSum sum_;
  std::unique_ptr<Engine> engine_;
  int64_t chunk_ = 64;
  std::string note_;
};

// Checks every rank's share against its budget; throws naming the model size and budgets.
void check_budgets(const GGUFFile& file, const HParams& hp, const Plan& plan, const std::vector<uint64_t>& mem,
                   int64_t n_ctx, int64_t chunk, KVType kv_type = KVType::F32);

}  // namespace orchard::parallel
