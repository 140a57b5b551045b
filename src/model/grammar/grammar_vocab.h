#pragma once
// A grammar over one vocabulary: for each automaton state, the tokens it admits and the state
// each leads to, found by one trie walk the first time the state is met and then kept. Replies
// meet the same states again and again (inside a string, after every plain character), so most
// masks are a read of that list: 31,724 entries for an open string on Llama 2's vocabulary, where
// the walk reads 57,507 trie nodes.
//
// Not thread-safe (one sampler thread). trim() starts over once the tables pass a budget.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/grammar/grammar_dfa.h"
#include "model/grammar/token_trie.h"

namespace orchard {

class GrammarVocab {
 public:
  struct Admitted {
    int32_t token;
    uint32_t after;  // the state the token leads to
  };

  GrammarVocab(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  GrammarDfa& dfa() { return dfa_; }
  std::span<const Admitted> admitted(uint32_t state);
  // Forgets every state when the automaton holds more than max_states (or their stacks more
  // than 16 positions a state on average) or the lists more than max_entries tokens; true when
  // it did (state ids from before are void, dfa().epoch() moved).
  bool trim(size_t max_states, size_t max_entries);

 private:
  GrammarDfa dfa_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<std::vector<Admitted>> lists_;  // per state id
  std::vector<uint8_t> listed_;
  size_t entries_ = 0;
};

}  // namespace orchard
