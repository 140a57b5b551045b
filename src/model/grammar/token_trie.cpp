#include "model/grammar/token_trie.h"

#include <algorithm>

namespace orchard {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < pieces.size(); ++id)
    if (!pieces[id].empty()) order.push_back(static_cast<int32_t>(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  tokens_ = order;

  // Each node covers the run of sorted pieces sharing its prefix: [begin, end) of length
  // `depth`; those exactly `depth` long sort first and end at the node.
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  nodes_.emplace_back();
  std::vector<Pending> todo{{0, 0, order.size(), 0}};
  while (!todo.empty()) {
    const Pending p = todo.back();
    todo.pop_back();
    size_t i = p.begin;
    while (i < p.end && pieces[order[i]].size() == p.depth) ++i;
    nodes_[p.node].first_token = static_cast<uint32_t>(p.begin);
    nodes_[p.node].tokens = static_cast<uint32_t>(i - p.begin);
    // Children: one per distinct next byte, laid out together.
    std::vector<Pending> kids;
    while (i < p.end) {
      const unsigned char c = static_cast<unsigned char>(pieces[order[i]][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<unsigned char>(pieces[order[j]][p.depth]) == c) ++j;
      kids.push_back({0, i, j, p.depth + 1});
      i = j;
    }
    nodes_[p.node].first_child = static_cast<uint32_t>(child_byte_.size());
    nodes_[p.node].children = static_cast<uint32_t>(kids.size());
    for (Pending& k : kids) {
      k.node = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      child_byte_.push_back(static_cast<unsigned char>(pieces[order[k.begin]][p.depth]));
      child_node_.push_back(k.node);
    }
    // First child on top: the walk's depth-first order then reads the nodes nearly in sequence.
    todo.insert(todo.end(), kids.rbegin(), kids.rend());
  }
}

}  // namespace orchard
