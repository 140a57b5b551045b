#pragma once
// Placement without reading every node: the nodes kept in memory, and per model name the nodes
// that hold it in score order.
//
// place() (placement.h) judges every node for every job: its row parsed, the planner run. At a
// network's size that is the coordinator's whole time (10,000 nodes: 3–4 placements/s). A
// node's score for a job depends on the job only through the model (placement.h, step 3), so
// each node is filed per model under score_of(model_speed(node, model), node) and the index
// visits nodes best first, judging each exactly as place() does (lasting and passing reasons,
// the job's own plan); it stops once the next score is below the runner-up's. Same choice, same
// reason, as place() over every node. When no node can start the job, every node is judged
// (for the message, and to tell waiting from hopeless).
//
// The index holds what the store last showed it; the store brings it up to date inside each
// placement's transaction from the rows changed since (job_store.h: nodes.seq), so it never
// places on old state, even with other coordinators writing to the same database.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "network/placement.h"

namespace orchard::network {

class NodeIndex {
 public:
  // Adds the node or replaces what was known of it. `info_text`: the stored description it
  // was parsed from. The same text as before keeps the description and plans already made
  // (view.info may then be left unparsed: only its id is read).
  void update(NodeView view, const std::string& info_text = {});
  const std::string* info_text(const std::string& node_id) const;  // null for an unknown node
  const NodeView* find(const std::string& node_id) const;
  // One more live job on the node, as its next re-read will show: the placements of one
  // batch see the ones before them without reading the node back.
  void add_job(const std::string& node_id);
  // cost_of() the node's model of that name, as filed; null for an unknown node or model.
  const parallel::ModelCost* cost(const std::string& node_id, const std::string& model) const;
  size_t size() const { return nodes_.size(); }
  std::vector<NodeView> views() const;  // every node, in node id order

  // What place(job, views(), o) returns; `judged` (optional) counts the nodes it judged.
  PlacementResult place(const JobDemand& job, const PlacementOptions& o, size_t* judged = nullptr) const;

 private:
  struct Key {
    double score;
    std::string node_id;
    bool operator<(const Key& b) const { return score != b.score ? score > b.score : node_id < b.node_id; }
  };
  struct Entry {
    NodeView view;
    std::string info_text;
    std::vector<std::pair<std::string, double>> speed;  // per model name: model_speed() (−1: cannot run it)
    std::vector<std::shared_ptr<const parallel::ModelCost>> cost;  // per model name, as `speed`
    std::vector<std::pair<std::string, double>> keys;   // per model name: the score it is filed under
  };
  void file(Entry& e);
  void unfile(const Entry& e);

  std::unordered_map<std::string, Entry> nodes_;
  // cost_of() each distinct model description (its JSON), shared by the nodes that hold it.
  std::unordered_map<std::string, std::weak_ptr<const parallel::ModelCost>> costs_;
  static constexpr size_t kMaxCosts = 4096;
  std::unordered_map<std::string, std::set<Key>> by_model_;
};

}  // namespace orchard::network
