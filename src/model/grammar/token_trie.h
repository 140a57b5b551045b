#pragma once
// A vocabulary's token pieces as a trie, so a constraint checks each shared prefix once: the
// tokens a grammar state admits are found by walking the trie one byte per edge through the
// grammar's automaton (grammar_dfa.h), pruning a whole subtree at the first byte refused (most
// of the vocabulary, between values).
#include <cstdint>
#include <string>
#include <vector>

#include "model/grammar/grammar_dfa.h"

namespace orchard {

class TokenTrie {
 public:
  TokenTrie() = default;
  // pieces[id] is token id's text; tokens with empty text are left out.
  explicit TokenTrie(const std::vector<std::string>& pieces);

  // Calls visit(id, state after the token) for every token whose whole text state `from` admits.
  template <class Visit>
  void for_each_admitted(GrammarDfa& dfa, uint32_t from, Visit&& visit) const {
    if (!nodes_.empty() && from != GrammarDfa::kDead) walk(0, dfa, from, visit);
  }

  size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t first_child = 0, children = 0;  // into child_byte_ / child_node_
    uint32_t first_token = 0, tokens = 0;    // into tokens_
  };

  template <class Visit>
  void walk(uint32_t node, GrammarDfa& dfa, uint32_t state, Visit& visit) const {
    const Node& n = nodes_[node];
    for (uint32_t i = n.first_child; i < n.first_child + n.children; ++i) {
      const uint32_t next = dfa.next(state, child_byte_[i]);
      if (next == GrammarDfa::kDead) continue;
      const Node& child = nodes_[child_node_[i]];
      for (uint32_t t = child.first_token; t < child.first_token + child.tokens; ++t) visit(tokens_[t], next);
      if (child.children) walk(child_node_[i], dfa, next, visit);
    }
  }

  std::vector<Node> nodes_;
  std::vector<unsigned char> child_byte_;
  std::vector<uint32_t> child_node_;
  std::vector<int32_t> tokens_;
};

}  // namespace orchard
