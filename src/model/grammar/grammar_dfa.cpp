#include "model/grammar/grammar_dfa.h"

namespace orchard {

GrammarDfa::GrammarDfa(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {}

size_t GrammarDfa::Hash::operator()(const std::vector<uint32_t>& w) const {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t x : w) h = (h ^ x) * 1099511628211ull;
  return static_cast<size_t>(h);
}

uint32_t GrammarDfa::intern(const GrammarMatcher& m) {
  if (m.refused()) return kDead;
  auto [it, added] = ids_.try_emplace(m.stacks(), static_cast<uint32_t>(states_.size()));
  if (added) {
    states_.push_back(m);
    words_ += m.stacks().size();
    info_.push_back({m.closing_length(), m.complete(), m.can_continue()});
    transitions_.emplace_back();
    transitions_.back().fill(kUnknown);
  }
  return it->second;
}

uint32_t GrammarDfa::compute(uint32_t s, unsigned char c) {
  if (!states_[s].feed_into(c, scratch_)) return kDead;
  return intern(scratch_);
}

void GrammarDfa::clear() {
  states_.clear();
  info_.clear();
  transitions_.clear();
  ids_.clear();
  words_ = 0;
  ++epoch_;
}

}  // namespace orchard
