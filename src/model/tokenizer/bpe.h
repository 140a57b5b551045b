#pragma once
// GPT-2-style byte-level BPE (tokenizer.ggml.model = "gpt2"): text is split by the
// pre-tokenizer, each piece is mapped to the byte-level alphabet, and adjacent symbols are merged
// lowest merge rank first (rank = index in tokenizer.ggml.merges), as in llama.cpp's
// llm_tokenizer_bpe.
//
// decode(encode(x)) == x for any bytes the vocabulary's alphabet covers (all 256 in most; falcon
// and DeepSeek lack 0xFE/0xFF, which never occur in valid UTF-8: such bytes become UNK or are
// dropped). decode() does not apply Hugging Face's clean_up_tokenization_spaces (" ." -> "."),
// which would break that round trip.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer/flat_index.h"
#include "model/tokenizer/pretokenize.h"
#include "model/tokenizer/vocab.h"

namespace orchard {

class BpeTokenizer final : public VocabTokenizer {
 public:
  explicit BpeTokenizer(const GGUFFile& file);

  std::vector<TokenId> encode(std::string_view text, bool add_special,
                              bool parse_special = false) const override;
  std::string token_to_piece(TokenId id, bool special = false) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of the merged text
  };
  struct Scratch;

  // Symbol ids: vocabulary ids, then ids for merge operands/results that are not tokens (so a
  // merge list that mentions them still merges exactly as it says).
  int32_t symbol_id(std::string_view text);
  void encode_piece(std::string_view bytes, Scratch& scratch, std::vector<TokenId>& out) const;
  void emit_bytes(std::string_view bytes, std::vector<TokenId>& out) const;

  PreTokenizer pre_;
  PairIndex<Merge> merges_;  // (left symbol id, right symbol id) -> merge
  std::unordered_map<std::string, int32_t> extra_symbols_;
  std::array<int32_t, 256> byte_symbol_{};  // symbol id of each byte's alphabet character, or -1
  std::array<TokenId, 256> byte_token_{};   // token of each byte's alphabet character, or -1
};

}  // namespace orchard
