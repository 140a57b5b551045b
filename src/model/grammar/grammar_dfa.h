#pragma once
// A lazily built automaton over a grammar's matcher states: each distinct matcher state gets an
// id, and the state one byte leads to is computed once and then read from a table. Masking a
// vocabulary walks every token's bytes (token_trie.h); inside a string nearly every token is
// admitted, and the same few states recur (every plain character leads back to "inside the
// string"), so after the first walk a byte costs a table read instead of a parse step (63 ns a
// byte on the Llama 2 vocabulary's 57,507 trie nodes before; docs/benchmarks.md has the after).
//
// Not thread-safe: one sampler thread uses it. It grows with the states seen; the owner clears
// it (clear()) when size() passes its budget, and re-interns the matchers it keeps.
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/grammar/grammar_matcher.h"

namespace orchard {

class GrammarDfa {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;  // no sentence continues this way

  explicit GrammarDfa(std::shared_ptr<const Grammar> grammar);

  // The id of `m`'s state (a new id the first time it is seen).
  uint32_t intern(const GrammarMatcher& m);
  uint32_t start() { return intern(GrammarMatcher(grammar_)); }
  // The state byte c leads to from s, or kDead.
  uint32_t next(uint32_t s, unsigned char c) {
    const uint32_t t = transitions_[s][c];
    if (t != kUnknown) return t;
    const uint32_t computed = compute(s, c);  // may grow transitions_: index again after
    transitions_[s][c] = computed;
    return computed;
  }
  bool complete(uint32_t s) const { return info_[s].complete; }
  bool can_continue(uint32_t s) const { return info_[s].can_continue; }
  uint32_t closing_length(uint32_t s) const { return info_[s].closing; }
  const GrammarMatcher& matcher(uint32_t s) const { return states_[s]; }

  size_t size() const { return states_.size(); }
  // Stack positions held over all states (each kept twice: the state and its key).
  size_t words() const { return words_; }
  // Forgets every state; ids from before are void (epoch() tells them apart).
  void clear();
  uint64_t epoch() const { return epoch_; }
  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX - 1;
  struct Info {
    uint32_t closing;
    bool complete, can_continue;
  };
  struct Hash {
    size_t operator()(const std::vector<uint32_t>& w) const;
  };
  uint32_t compute(uint32_t s, unsigned char c);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<GrammarMatcher> states_;
  std::vector<Info> info_;
  std::vector<std::array<uint32_t, 256>> transitions_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, Hash> ids_;
  GrammarMatcher scratch_;
  uint64_t epoch_ = 0;
  size_t words_ = 0;
};

}  // namespace orchard
