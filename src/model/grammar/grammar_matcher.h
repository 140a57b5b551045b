#pragma once
// Whether text so far can still become a sentence of a Grammar: the set of parse stacks a
// pushdown recognizer holds after the bytes fed (several while the text is ambiguous; none once
// it is refused). A stack lists the positions still to match, innermost last; it is expanded
// lazily, only along alternatives whose first bytes admit the byte being fed, so a stack inside
// a long repetition stays one stack of constant depth. Copying a matcher is copying one vector:
// constrained sampling advances a copy per candidate token (token_mask.h).
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "model/grammar/grammar.h"

namespace orchard {

class GrammarMatcher {
 public:
  // Stacks kept at most; a byte that would leave more is refused (a grammar that ambiguous is
  // a mistake in it, and checking thousands of parses per byte would stall sampling).
  static constexpr size_t kMaxStacks = 256;
  // Positions one stack may hold; deeper is refused. A recursive grammar nests without bound
  // (JSON: "[[[[…"), and every position is memory in each state an automaton keeps.
  static constexpr size_t kMaxDepth = 1024;
  // Expansion steps one byte may take; more is refused. Alternatives sharing a prefix are
  // followed one by one, so a grammar can make them multiply (anyOf of anyOf …).
  static constexpr size_t kMaxWork = 4096;

  GrammarMatcher() = default;
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Feeds one byte; false (leaving the matcher refused: every later feed fails) when no
  // sentence continues this way.
  bool feed(unsigned char c);
  bool feed(std::string_view s) {
    for (char c : s)
      if (!feed(static_cast<unsigned char>(c))) return false;
    return true;
  }
  // The same into `out`, leaving this matcher as it was (out's storage is reused).
  bool feed_into(unsigned char c, GrammarMatcher& out) const;

  bool refused() const { return words_.empty(); }
  // The text so far is a whole sentence.
  bool complete() const;
  // Some byte may still follow (false once complete with nothing allowed after).
  bool can_continue() const;
  // The fewest bytes that would make the text a whole sentence (0 when it is; UINT32_MAX
  // when refused).
  uint32_t closing_length() const;
  const Grammar& grammar() const { return *grammar_; }
  // The stacks, as stored (each its length then its positions): the state's identity.
  const std::vector<uint32_t>& stacks() const { return words_; }

 private:
  void step(std::vector<uint32_t>& stack, unsigned char c, std::vector<uint32_t>& out, size_t& stacks, size_t& work) const;
  void emit(std::vector<uint32_t>& stack, std::vector<uint32_t>& out, size_t& stacks) const;

  std::shared_ptr<const Grammar> grammar_;
  // Stacks back to back, each as its length then its positions, innermost last.
  std::vector<uint32_t> words_;
  mutable std::vector<uint32_t> scratch_;
};

}  // namespace orchard
