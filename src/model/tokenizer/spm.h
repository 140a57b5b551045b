#pragma once
// SentencePiece-style BPE with scores (tokenizer.ggml.model = "llama"), with llama.cpp's
// semantics: a dummy-prefix space in front of each run of raw text that starts the input or
// follows a special token (unless tokenizer.ggml.add_space_prefix is false), ' ' written as
// U+2581 '▁', then repeatedly merging the adjacent pair whose concatenation is the vocabulary
// entry with the highest score (leftmost on ties). Characters that end up as no token are spelled
// with the <0xXX> byte tokens, or UNK when the vocabulary has none.
//
// decode(encode(x)) == x for every x except where the text itself is ambiguous:
//  - a literal U+2581 '▁' in x comes back as ' ' (SentencePiece cannot tell them apart);
//  - with parse_special, each text run after a special token gets its own dummy-prefix space,
//    and decode() removes only the one at the start of the sequence (llama.cpp behaves alike);
//  - characters with neither a token nor a byte token become UNK.
// Not reproduced from llama.cpp: its name-based hack that strips whitespace after Phi-3 special
// tokens (rstrip), which only matters with parse_special.
#include <array>
#include <string>
#include <vector>

#include "model/tokenizer/vocab.h"

namespace orchard {

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(const GGUFFile& file);

  std::vector<TokenId> encode(std::string_view text, bool add_special,
                              bool parse_special = false) const override;
  std::string token_to_piece(TokenId id, bool special = false) const override;

 protected:
  bool adds_dummy_prefix() const override { return add_space_prefix_; }

 private:
  struct Scratch;
  // `text` is already escaped ('▁' for spaces).
  void encode_escaped(std::string_view text, Scratch& scratch, std::vector<TokenId>& out) const;

  bool add_space_prefix_ = true;
  std::array<TokenId, 256> byte_token_{};  // <0xXX> token of each byte (or the byte itself), -1
  std::vector<int16_t> byte_of_token_;     // the byte a Byte-type token stands for, -1 otherwise
};

}  // namespace orchard
