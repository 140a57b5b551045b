#include "parallel/discovered_cluster.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "parallel/auto_plan.h"
#include "tensor/error.h"

namespace orchard::parallel {
namespace {

constexpr double kStepBytes = 256.0 * 1024;

std::pair<std::string, std::string> pair_of(const MeasuredPath& p) {
  return p.from < p.to ? std::make_pair(p.from, p.to) : std::make_pair(p.to, p.from);
}

}  // namespace

double path_cost_us(const MeasuredPath& p) {
  const double transfer_us = p.mbit_s > 0 ? kStepBytes * 8 / p.mbit_s : 1e12;
  return p.rtt_us / 2 + transfer_us;
}

std::vector<MeasuredPath> choose_paths(const std::vector<MeasuredPath>& measured) {
  std::map<std::pair<std::string, std::string>, MeasuredPath> best;
  for (const MeasuredPath& p : measured) {
    if (p.from == p.to) continue;
    auto [it, fresh] = best.emplace(pair_of(p), p);
    // Ties (equal costs) go to the smaller address, so every machine chooses alike.
    if (!fresh && (path_cost_us(p) < path_cost_us(it->second) ||
                   (path_cost_us(p) == path_cost_us(it->second) && p.address < it->second.address)))
      it->second = p;
  }
  std::vector<MeasuredPath> out;
  for (auto& [key, p] : best) out.push_back(p);
  return out;
}

DiscoveredPlan plan_discovered(const ModelCost& model, const std::vector<DiscoveredMachine>& machines,
                               const std::vector<MeasuredPath>& chosen, const PredictOptions& options,
                               std::optional<Kind> kind) {
  if (machines.empty()) throw Error("no machines to plan over");
  std::map<std::pair<std::string, std::string>, const MeasuredPath*> link;
  for (const MeasuredPath& p : chosen) link[pair_of(p)] = &p;
  // Keep machines in the order given while each reaches every one kept before it; worst[k] is
  // the slowest chosen link among the first k + 1.
  std::vector<const DiscoveredMachine*> kept;
  std::vector<const MeasuredPath*> worst;
  for (const DiscoveredMachine& m : machines) {
    const MeasuredPath* slowest = worst.empty() ? nullptr : worst.back();
    bool reaches = true;
    for (const DiscoveredMachine* k : kept) {
      auto it = link.find(pair_of(MeasuredPath{m.id, k->id, "", 0, 0}));
      if (it == link.end()) {
        reaches = false;
        break;
      }
      if (!slowest || path_cost_us(*it->second) > path_cost_us(*slowest)) slowest = it->second;
    }
    if (!reaches) continue;
    kept.push_back(&m);
    worst.push_back(slowest);
  }
  auto cluster_of = [&](size_t k) {
    ClusterSpec cl;
    cl.name = "discovered";
    for (size_t i = 0; i < k; ++i) {
      const DiscoveredMachine* m = kept[i];
      NodeSpec n;
      n.name = m->name.empty() ? m->id : m->name;
      const double gib = static_cast<double>(m->memory_bytes) / 1073741824.0;
      n.machine = m->calibrated ? *m->calibrated : rough_machine(m->cores, gib);
      n.memory_gib = gib;
      n.ranks = 1;
      cl.nodes.push_back(std::move(n));
    }
    cl.local_backend = "tcp";
    cl.link.spec.id = cl.link.spec.name = "measured";
    if (const MeasuredPath* w = worst[k - 1]) {
      cl.link.spec.latency_us = w->rtt_us / 2;
      cl.link.spec.gbs = w->mbit_s / 8000;
    }
    return cl;
  };
  // Each number of machines with its own slowest link: two machines on a fast cable are not
  // held back by a third one's slow link they do not use.
  DiscoveredPlan out;
  bool found = false;
  size_t used = 0;
  for (size_t k = kind ? kept.size() : 1; k <= kept.size(); ++k)
    for (const Prediction& p : rank_plans(model, cluster_of(k), options))
      if (p.candidate.n_nodes == static_cast<int>(k) && p.fits && p.unsupported.empty() &&
          (!kind || (p.candidate.kind == *kind && p.candidate.ranks() == static_cast<int>(k)))) {
        if (!found || p.tg_tps > out.prediction.tg_tps) out.prediction = p, used = k, found = true;
        break;
      }
  if (!found && !kind) choose_plan(model, cluster_of(kept.size()), options);  // throws, naming the shortfall
  if (!found)
    throw Error(kind ? std::string("no ") + kind_name(*kind) + " split over the " + std::to_string(kept.size()) +
                           " machines reachable fits this model"
                     : "no plan over the discovered machines");
  for (size_t i = 0; i < used; ++i) out.machines.push_back(kept[i]->id);
  if (worst[used - 1]) out.bottleneck = *worst[used - 1];
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s over %zu of %zu machines: predicted %.1f tokens/s, TTFT %.0f ms%s",
                out.prediction.candidate.label().c_str(), out.machines.size(), machines.size(),
                out.prediction.tg_tps, out.prediction.ttft_s * 1e3,
                out.bottleneck.address.empty()
                    ? ""
                    : (", slowest link " + out.bottleneck.address + " (" + std::to_string(static_cast<int>(out.bottleneck.rtt_us)) +
                       " µs round trip, " + std::to_string(static_cast<int>(out.bottleneck.mbit_s)) + " Mbit/s)")
                          .c_str());
  out.why = buf;
  return out;
}

}  // namespace orchard::parallel
