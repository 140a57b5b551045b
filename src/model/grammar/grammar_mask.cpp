#include "model/grammar/grammar_mask.h"

#include <limits>

namespace orchard {

VocabPieces VocabPieces::of(const Tokenizer& tok, int64_t n_vocab) {
  VocabPieces v;
  v.pieces.resize(static_cast<size_t>(n_vocab));
  for (int64_t id = 0; id < std::min<int64_t>(n_vocab, tok.vocab_size()); ++id) {
    if (tok.is_eog(static_cast<TokenId>(id))) v.eog.push_back(static_cast<TokenId>(id));
    else v.pieces[static_cast<size_t>(id)] = tok.token_to_piece(static_cast<TokenId>(id));
  }
  v.trie = std::make_shared<const TokenTrie>(v.pieces);
  return v;
}

const float* mask_logits(GrammarVocab& gv, uint32_t state, const float* logits, int64_t n_vocab, int64_t left,
                         std::span<const TokenId> eog, std::vector<float>& masked) {
  GrammarDfa& dfa = gv.dfa();
  masked.assign(static_cast<size_t>(n_vocab), -std::numeric_limits<float>::infinity());
  for (const bool budget : {true, false}) {
    bool any = false;
    for (const GrammarVocab::Admitted& a : gv.admitted(state)) {
      if (budget && !dfa.complete(a.after) && static_cast<int64_t>(dfa.closing_length(a.after)) + 1 >= left) continue;
      masked[static_cast<size_t>(a.token)] = logits[a.token];
      any = true;
    }
    if (dfa.complete(state))
      for (TokenId id : eog) masked[static_cast<size_t>(id)] = logits[id], any = true;
    if (any) return masked.data();
  }
  return nullptr;
}

uint32_t advance(GrammarDfa& dfa, uint32_t state, const std::string& piece) {
  for (char c : piece) {
    if (state == GrammarDfa::kDead) break;
    state = dfa.next(state, static_cast<unsigned char>(c));
  }
  return state;
}

}  // namespace orchard
