#include "parallel/session.h"

#include <algorithm>

#include "parallel/auto_plan.h"
#include "parallel/memory.h"
#include "tensor/error.h"

namespace orchard::parallel {

void check_budgets(const GGUFFile& file, const HParams& hp, const Plan& plan, const std::vector<uint64_t>& mem,
                   int64_t n_ctx, int64_t chunk, KVType kv_type) {
  if (mem.empty()) return;
  const ShardBytes whole = shard_bytes(file, hp, Shard{}, n_ctx, chunk, kv_type_bytes(kv_type));
  uint64_t budget_sum = 0;
  std::string budgets;
  for (size_t r = 0; r < mem.size(); ++r) {
    budget_sum += mem[r];
    budgets += (r ? ", " : "") + format_bytes(mem[r]);
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const ShardBytes need = shard_bytes(file, hp, plan.ranks[r].shard, n_ctx, chunk, kv_type_bytes(kv_type));
    if (need.total() > mem[r])
      throw Error("the model does not fit: " + file.path() + " needs " + format_bytes(whole.total()) +
                  " in all (weights " + format_bytes(whole.weights) + ", KV cache for " + std::to_string(n_ctx) +
                  " tokens " + format_bytes(whole.kv) + ", scratch " + format_bytes(whole.scratch) + "); under this " + kind_name(plan.kind) + " plan rank " +
                  std::to_string(r) + " needs " + format_bytes(need.total()) + " (weights " +
                  format_bytes(need.weights) + ", KV " + format_bytes(need.kv) + ", scratch " +
                  format_bytes(need.scratch) + ") but its budget is " + format_bytes(mem[r]) + ". Budgets: " +
                  budgets + " (" + format_bytes(budget_sum) + " together)" +
                  (budget_sum < whole.total() ? ": add ranks or memory" : ": try more pipeline stages or a smaller --ctx"));
  }
}

std::unique_ptr<Session> Session::start(dist::Group& world, const SessionOptions& o) {
  std::unique_ptr<Session> s(new Session(world));
  s->chunk_ = o.chunk;
  const int n = world.size();
  std::vector<uint64_t> mem = o.mem;
  if (mem.size() == 1) mem.assign(static_cast<size_t>(n), mem[0]);
  if (!mem.empty() && static_cast<int>(mem.size()) != n)
    throw Error("--mem gives " + std::to_string(mem.size()) + " budgets for " + std::to_string(n) + " ranks");
  Kind kind = o.kind;
  int tp = o.tp;
  if (o.choose) {
    PredictOptions po;
    po.n_ctx = o.engine.n_ctx > 0 ? o.engine.n_ctx : 4096;
    po.chunk = o.chunk;
    po.kv_type = o.engine.kv_type;
    const AutoChoice c = choose_split(world, o.engine.model_path, mem, o.engine.threads, po);
    kind = c.kind;
    tp = c.tp;
    s->note_ = c.why;
  }
  {
    auto header = GGUFFile::open(o.engine.model_path, GGUFLoad::Map);
    const HParams hp = HParams::from_gguf(*header);
    const int64_t n_ctx = o.engine.n_ctx > 0 ? o.engine.n_ctx : std::min<int64_t>(hp.n_ctx_train, 4096);
    // Pipeline stages get layers in proportion to their budgets.
    std::vector<double> weights, group_weights;
    if (!mem.empty() && kind != Kind::kTensor) {
      const int per = kind == Kind::kHybrid ? (tp > 0 ? tp : (n % 2 == 0 ? 2 : 1))
                      : kind == Kind::kExpert ? (tp > 0 ? tp : n)
                                              : 1;
      // Expert groups: each rank's share of the experts follows its budget (the first stage's).
      if (kind == Kind::kExpert)
        for (int t = 0; t < per; ++t) group_weights.push_back(static_cast<double>(mem[static_cast<size_t>(t)]));
      for (int st = 0; st < n / per; ++st) {
        uint64_t least = mem[static_cast<size_t>(st * per)];
        for (int t = 1; t < per; ++t) least = std::min(least, mem[static_cast<size_t>(st * per + t)]);
        weights.push_back(static_cast<double>(least));
      }
    }
    s->plan_ = make_plan(hp, kind, n, tp, weights, group_weights, o.whole_attention);
    check_budgets(*header, hp, s->plan_, mem, n_ctx, o.chunk, o.engine.kv_type);
  }
  const RankRole& role = s->plan_.ranks[static_cast<size_t>(world.rank())];
  s->tp_ = world.split(role.stage, role.tp_rank);
  s->sum_.set_group(s->tp_.get());
  EngineOptions eo = o.engine;
  eo.shard = role.shard;
  eo.partial_sum = &s->sum_;
  s->engine_ = Engine::load(eo);
  // Nobody starts before everyone has loaded (a failed load fails the job at once).
  world.barrier();
  return s;
}

std::unique_ptr<DistributedForward> Session::make_forward(KVCache& kv) {
  return std::make_unique<DistributedForward>(engine_->model(), kv, world_, tp_.get(), plan_, chunk_);
}

GenerateResult Session::generate(const std::string& prompt, const GenerateOptions& options,
                                 const std::function<bool(const std::string&)>& on_text) {
  auto kv = engine_->new_cache();
  DistributedForward f(engine_->model(), *kv, world_, tp_.get(), plan_, chunk_);
  return engine_->generate_with(f, prompt, options, on_text);
}

}  // namespace orchard::parallel
