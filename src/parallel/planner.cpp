// Choosing a split: predict every candidate, keep those that fit, take the fastest.
#include <algorithm>

#include "parallel/memory.h"
#include "parallel/predict.h"
#include "tensor/error.h"

namespace orchard::parallel {

std::vector<Prediction> rank_plans(const ModelCost& m, const ClusterSpec& cl, const PredictOptions& o) {
  std::vector<Prediction> out;
  int ranks = 0;
  for (int k = 1; k <= static_cast<int>(cl.nodes.size()); ++k) {
    ranks += cl.nodes[static_cast<size_t>(k - 1)].ranks;
    for (int tp = 1; tp <= ranks; ++tp) {
      if (ranks % tp != 0) continue;
      Candidate c;
      c.n_nodes = k;
      c.tp = tp;
      c.stages = ranks / tp;
      if (c.stages > m.n_layers) continue;
      c.kind = tp == 1 ? Kind::kPipeline : (c.stages == 1 ? Kind::kTensor : Kind::kHybrid);
      if (c.tp <= m.n_kv_heads) out.push_back(predict(m, cl, c, o));
      // The same groups splitting experts instead of heads (one expert rank is a pipeline).
      if (tp > 1 && m.n_experts >= tp) {
        c.kind = Kind::kExpert;
        out.push_back(predict(m, cl, c, o));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Prediction& a, const Prediction& b) {
    if (a.fits != b.fits) return a.fits;
    return a.tg_tps > b.tg_tps;
  });
  return out;
}

Prediction choose_plan(const ModelCost& m, const ClusterSpec& cl, const PredictOptions& o) {
  std::vector<Prediction> plans = rank_plans(m, cl, o);
  if (plans.empty()) throw Error("no split of " + m.name + " suits this cluster (too few layers or KV heads)");
  for (const Prediction& p : plans)
    if (p.fits && p.unsupported.empty()) return p;
  // Nothing fits: report the plan that comes closest, with its shortfall.
  double offered = 0;
  for (const NodeSpec& n : cl.nodes) offered += n.capacity_bytes();
  const double needed = m.held_bytes(0, m.n_layers, 1, true, true) + m.kv_bytes(0, m.n_layers, 1, o.n_ctx, o.kv_elem_bytes());
  if (plans.front().fits)
    throw Error("every split of " + m.name + " that fits needs what Orchard cannot do yet: " + plans.front().unsupported);
  const Prediction* closest = &plans.front();
  double least_over = 1e300;
  for (const Prediction& p : plans) {
    double over = 0;
    for (const NodeMemory& nm : p.memory) over += std::max(0.0, nm.need - nm.capacity);
    if (over < least_over) least_over = over, closest = &p;
  }
  throw Error("nothing fits: " + m.name + " needs " + format_size(needed) + " (weights " +
              format_size(m.bytes) + ", KV cache for " + std::to_string(o.n_ctx) +
              " tokens " + format_size(m.kv_bytes(0, m.n_layers, 1, o.n_ctx, o.kv_elem_bytes())) +
              ") and the cluster offers " + format_size(offered) + " usable" +
              (needed > offered ? ", short by " + format_size(needed - offered)
                                : ", but not in pieces this model splits into") +
              ". Closest: " + closest->candidate.label() + ", where " + closest->shortfall +
              ". Add machines or memory, use a smaller quantization, or shorten --ctx.");
}

}  // namespace orchard::parallel
