#include "network/node_index.h"

#include <algorithm>

#include "tensor/error.h"

namespace orchard::network {

void NodeIndex::update(NodeView view, const std::string& info_text) {
  auto [it, fresh] = nodes_.try_emplace(view.info.id);
  Entry& e = it->second;
  if (!fresh) unfile(e);
  if (!fresh && !info_text.empty() && info_text == e.info_text) {
    view.info = std::move(e.view.info);
  } else {
    e.speed.clear();
    e.cost.clear();
    for (const ModelInfo& m : view.info.models) {
      if (std::any_of(e.speed.begin(), e.speed.end(), [&](const auto& t) { return t.first == m.name; })) continue;
      if (costs_.size() > kMaxCosts)  // descriptions no node holds any more
        std::erase_if(costs_, [](const auto& c) { return c.second.expired(); });
      std::weak_ptr<const parallel::ModelCost>& known = costs_[to_json(m).dump()];
      auto cost = known.lock();
      if (!cost) known = cost = std::make_shared<const parallel::ModelCost>(cost_of(m));
      e.speed.emplace_back(m.name, model_speed(view.info, *cost));
      e.cost.push_back(std::move(cost));
    }
    e.info_text = info_text;
  }
  e.view = std::move(view);
  file(e);
}

void NodeIndex::file(Entry& e) {
  e.keys.clear();
  for (const auto& [model, speed] : e.speed) {
    const double score = speed < 0 ? -1 : score_of(speed, e.view);
    by_model_[model].insert({score, e.view.info.id});
    e.keys.emplace_back(model, score);
  }
}

void NodeIndex::unfile(const Entry& e) {
  for (const auto& [model, score] : e.keys) {
    auto set = by_model_.find(model);
    if (set == by_model_.end()) continue;
    set->second.erase({score, e.view.info.id});
    if (set->second.empty()) by_model_.erase(set);
  }
}

const std::string* NodeIndex::info_text(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second.info_text;
}

void NodeIndex::add_job(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  unfile(it->second);
  ++it->second.view.active_jobs;
  file(it->second);
}

const NodeView* NodeIndex::find(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second.view;
}

const parallel::ModelCost* NodeIndex::cost(const std::string& node_id, const std::string& model) const {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return nullptr;
  const Entry& e = it->second;
  for (size_t i = 0; i < e.speed.size(); ++i)
    if (e.speed[i].first == model) return e.cost[i].get();
  return nullptr;
}

std::vector<NodeView> NodeIndex::views() const {
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (const auto& [id, e] : nodes_) out.push_back(e.view);
  std::sort(out.begin(), out.end(), [](const NodeView& a, const NodeView& b) { return a.info.id < b.info.id; });
  return out;
}

PlacementResult NodeIndex::place(const JobDemand& job, const PlacementOptions& o, size_t* judged) const {
  size_t count = 0;
  BestTwo best;
  auto consider = [&](const Entry& e) {
    ++count;
    const NodeView& v = e.view;
    const auto speed = std::find_if(e.speed.begin(), e.speed.end(), [&](const auto& m) { return m.first == job.model; });
    const bool held = speed != e.speed.end();
    Judged j = judge(job, v, o, held ? &speed->second : nullptr, held ? e.cost[speed - e.speed.begin()].get() : nullptr);
    if (j.choice) best.offer(std::move(*j.choice), v);
  };
  if (!job.only_node.empty()) {
    // A canary: every other node is refused outright, so there is no runner-up to find.
    if (auto it = nodes_.find(job.only_node); it != nodes_.end()) consider(it->second);
  } else if (auto set = by_model_.find(job.model); set != by_model_.end()) {
    for (const Key& k : set->second) {
      if (k.score < 0) break;  // this and every later node cannot hold the model at all
      // Nothing from here on can reach the runner-up: its score is below, or equal with a
      // later node id. (A node's filed score is the one judge() gives it when eligible.)
      const Choice* next = best.runner_up();
      if (next && (k.score < next->score || (k.score == next->score && k.node_id > next->node_id))) break;
      consider(nodes_.at(k.node_id));
    }
  }
  if (judged) *judged = count;
  PlacementResult r;
  r.choice = best.winner();
  if (!r.choice) {
    // Nobody can start it: every node judged, for the reasons and for waiting vs hopeless.
    if (judged) *judged += nodes_.size();
    return network::place(job, views(), o);
  }
  return r;
}

}  // namespace orchard::network
