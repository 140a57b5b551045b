#include "model/grammar/grammar_vocab.h"

namespace orchard {

GrammarVocab::GrammarVocab(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : dfa_(std::move(grammar)), trie_(std::move(trie)) {}

std::span<const GrammarVocab::Admitted> GrammarVocab::admitted(uint32_t state) {
  if (state == GrammarDfa::kDead) return {};
  if (state >= listed_.size()) {
    listed_.resize(state + 1, 0);
    lists_.resize(state + 1);
  }
  if (!listed_[state]) {
    std::vector<Admitted> list;
    trie_->for_each_admitted(dfa_, state, [&](int32_t id, uint32_t after) { list.push_back({id, after}); });
    entries_ += list.size();
    lists_[state] = std::move(list);  // the walk may have grown lists_' index space, not moved it
    listed_[state] = 1;
  }
  return lists_[state];
}

bool GrammarVocab::trim(size_t max_states, size_t max_entries) {
  if (dfa_.size() <= max_states && dfa_.words() <= 16 * max_states && entries_ <= max_entries) return false;
  dfa_.clear();
  lists_.clear();
  listed_.clear();
  entries_ = 0;
  return true;
}

}  // namespace orchard
