#include "model/grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>

namespace orchard {

using Kind = Grammar::Kind;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  words_ = {1, 0};  // one stack: the start element, a reference to the root
}

bool GrammarMatcher::feed(unsigned char c) {
  GrammarMatcher next;
  if (!feed_into(c, next)) {
    words_.clear();
    return false;
  }
  words_.swap(next.words_);
  return true;
}

bool GrammarMatcher::feed_into(unsigned char c, GrammarMatcher& out) const {
  if (out.grammar_ != grammar_) out.grammar_ = grammar_;
  out.words_.clear();
  size_t stacks = 0, work = 0;
  for (size_t i = 0; i < words_.size();) {
    const uint32_t len = words_[i];
    if (len > 0) {
      scratch_.assign(words_.begin() + static_cast<std::ptrdiff_t>(i + 1),
                      words_.begin() + static_cast<std::ptrdiff_t>(i + 1 + len));
      step(scratch_, c, out.words_, stacks, work);
      if (stacks > kMaxStacks || work > kMaxWork) {
        out.words_.clear();
        return false;
      }
    }
    i += 1 + len;
  }
  return !out.words_.empty();
}

// Takes byte c on `stack` (consumed: changed or emptied), adding the stacks that result to out.
// At a rule, each alternative whose first bytes admit c is tried on its own copy, and so is
// passing over the rule when it may be empty; positions after a rule that ends its alternative
// are not kept (a tail call), which keeps right-recursive repetitions flat.
void GrammarMatcher::step(std::vector<uint32_t>& stack, unsigned char c, std::vector<uint32_t>& out,
                          size_t& stacks, size_t& work) const {
  const Grammar& g = *grammar_;
  for (;;) {
    if (stack.empty() || ++work > kMaxWork || stack.size() > kMaxDepth) return;
    const uint32_t e = stack.back();
    const Grammar::Element el = g.elements[e];
    if (el.kind == Kind::End) {
      stack.pop_back();
      continue;
    }
    if (el.kind == Kind::Bytes) {
      if (g.sets[el.arg].has(c)) {
        stack.back() = e + 1;
        emit(stack, out, stacks);
      }
      return;
    }
    const uint32_t r = el.arg;
    const bool tail = g.elements[e + 1].kind == Kind::End;
    const bool skip = g.rule_nullable[r] && (g.first[e + 1].has(c) || g.nullable[e + 1]);
    uint32_t last = UINT32_MAX;
    for (uint32_t a = g.alt_begin[r]; a < g.alt_begin[r + 1]; ++a)
      if (g.first[g.alts[a]].has(c)) last = a;
    for (uint32_t a = g.alt_begin[r]; last != UINT32_MAX && a <= last; ++a) {
      if (!g.first[g.alts[a]].has(c)) continue;
      if (a == last && !skip) {
        if (tail) stack.pop_back();
        else stack.back() = e + 1;
        stack.push_back(g.alts[a]);
        return step(stack, c, out, stacks, work);
      }
      std::vector<uint32_t> branch(stack);
      if (tail) branch.pop_back();
      else branch.back() = e + 1;
      branch.push_back(g.alts[a]);
      step(branch, c, out, stacks, work);
    }
    if (!skip) return;
    if (tail) stack.pop_back();
    else stack.back() = e + 1;
  }
}

void GrammarMatcher::emit(std::vector<uint32_t>& stack, std::vector<uint32_t>& out, size_t& stacks) const {
  const Grammar& g = *grammar_;
  while (!stack.empty() && g.elements[stack.back()].kind == Kind::End) stack.pop_back();
  if (stack.size() > kMaxDepth) return;  // nested too deep: this parse is dropped
  const auto len = static_cast<uint32_t>(stack.size());
  for (size_t i = 0; i < out.size(); i += 1 + out[i])
    if (out[i] == len && std::equal(stack.begin(), stack.end(), out.begin() + static_cast<std::ptrdiff_t>(i + 1)))
      return;
  out.push_back(len);
  out.insert(out.end(), stack.begin(), stack.end());
  ++stacks;
}

bool GrammarMatcher::complete() const {
  const Grammar& g = *grammar_;
  for (size_t i = 0; i < words_.size(); i += 1 + words_[i]) {
    bool all = true;
    for (uint32_t k = 1; k <= words_[i] && all; ++k) all = g.nullable[words_[i + k]];
    if (all) return true;
  }
  return false;
}

bool GrammarMatcher::can_continue() const {
  const Grammar& g = *grammar_;
  for (size_t i = 0; i < words_.size(); i += 1 + words_[i])
    for (uint32_t k = words_[i]; k >= 1; --k) {
      const uint32_t e = words_[i + k];
      if (!g.first[e].empty()) return true;
      if (!g.nullable[e]) break;
    }
  return false;
}

uint32_t GrammarMatcher::closing_length() const {
  const Grammar& g = *grammar_;
  uint32_t best = UINT32_MAX;
  for (size_t i = 0; i < words_.size(); i += 1 + words_[i]) {
    uint64_t sum = 0;
    for (uint32_t k = 1; k <= words_[i]; ++k) sum += g.min_len[words_[i + k]];
    best = static_cast<uint32_t>(std::min<uint64_t>(best, sum));
  }
  return best;
}

}  // namespace orchard
