#pragma once
// Holding one reply to a grammar, token by token, the same way wherever sampling happens (the
// server's scheduler, the engine's own loop, a network node's): the vocabulary's pieces as a
// trie, and per reply its state in the grammar's automaton.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/grammar/grammar_vocab.h"
#include "model/tokenizer/tokenizer.h"

namespace orchard {

// Every token's text (empty for end-of-generation tokens, which a grammar never spells), the
// same as a trie, and the end-of-generation tokens. Built once per vocabulary.
struct VocabPieces {
  std::vector<std::string> pieces;
  std::shared_ptr<const TokenTrie> trie;
  std::vector<TokenId> eog;
  static VocabPieces of(const Tokenizer& tok, int64_t n_vocab);
};

// What a grammar's tables may hold before they start over (GrammarVocab::trim): automaton
// states (1 KiB of transitions each) and listed tokens (8 bytes each).
constexpr size_t kMaxGrammarStates = 32768;
constexpr size_t kMaxGrammarListed = size_t{8} << 20;

// The logits with every token the grammar refuses from `state` at −∞ (into `masked`): a token
// only if the reply can still close after it within `left` tokens (every byte is a token in
// the vocabularies served, so a closing of n bytes takes at most n, and one to spare; when not
// even that is possible, any admitted token), end-of-generation only once the reply is whole.
// Null when nothing is admitted.
const float* mask_logits(GrammarVocab& gv, uint32_t state, const float* logits, int64_t n_vocab, int64_t left,
                         std::span<const TokenId> eog, std::vector<float>& masked);

// The state after `piece`; GrammarDfa::kDead if the grammar refuses it.
uint32_t advance(GrammarDfa& dfa, uint32_t state, const std::string& piece);

}  // namespace orchard
