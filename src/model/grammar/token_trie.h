#pragma once
// A vocabulary's token pieces as a trie, so a constraint checks each shared prefix once: the
// tokens a GrammarMatcher admits are found by walking the trie and feeding one byte per edge,
// pruning a whole subtree at the first byte refused (most of the vocabulary, between values).
#include <cstdint>
#include <string>
#include <vector>

#include "model/grammar/grammar_matcher.h"

namespace orchard {

class TokenTrie {
 public:
  TokenTrie() = default;
  // pieces[id] is token id's text; tokens with empty text are left out.
  explicit TokenTrie(const std::vector<std::string>& pieces);

  // Calls visit(id, matcher after the token) for every token whose whole text `from` admits.
  template <class Visit>
  void for_each_admitted(const GrammarMatcher& from, Visit&& visit) const {
    if (nodes_.empty()) return;
    if (states_.size() < depth_ + 1) states_.resize(depth_ + 1);
    walk(0, from, 0, visit);
  }

  size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t first_child = 0, children = 0;  // into child_byte_ / child_node_
    uint32_t first_token = 0, tokens = 0;    // into tokens_
  };

  template <class Visit>
  void walk(uint32_t node, const GrammarMatcher& state, size_t depth, Visit& visit) const {
    const Node& n = nodes_[node];
    GrammarMatcher& next = states_[depth];
    for (uint32_t i = n.first_child; i < n.first_child + n.children; ++i) {
      if (!state.feed_into(child_byte_[i], next)) continue;
      const Node& child = nodes_[child_node_[i]];
      for (uint32_t t = child.first_token; t < child.first_token + child.tokens; ++t) visit(tokens_[t], next);
      if (child.children) walk(child_node_[i], next, depth + 1, visit);
    }
  }

  std::vector<Node> nodes_;
  std::vector<unsigned char> child_byte_;
  std::vector<uint32_t> child_node_;
  std::vector<int32_t> tokens_;
  size_t depth_ = 0;  // the longest piece
  mutable std::vector<GrammarMatcher> states_;  // one per depth, reused between walks
};

}  // namespace orchard
