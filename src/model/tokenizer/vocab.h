#pragma once
// The vocabulary part of a GGUF tokenizer that does not depend on the algorithm: token texts,
// types and scores, the special ids, BOS/EOS policy, end-of-generation set, and the splitting of
// input text around special-token text. SPM and BPE build their encoders on top of it.
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "model/tokenizer/flat_index.h"
#include "model/tokenizer/tokenizer.h"

namespace orchard {

// Values a model family assumes when the GGUF does not say (llama.cpp's defaults).
struct SpecialTokenDefaults {
  TokenId bos = -1;
  TokenId eos = -1;
  TokenId unk = -1;
  bool add_bos = false;
  bool add_eos = false;
};

// A piece of input text after special-token splitting: either raw text or one special token.
struct TextFragment {
  std::string_view text;
  TokenId token = -1;  // >= 0 for a special token, -1 for raw text
};

class TokenVocab {
 public:
  // Reads tokenizer.ggml.{tokens,token_type,scores,*_token_id,add_*_token}; `need_scores` makes
  // a missing scores array an error. Throws orchard::Error naming file and key.
  TokenVocab(const GGUFFile& file, const SpecialTokenDefaults& defaults, bool need_scores);
  // The text index points into texts_, so the object stays where it was built.
  TokenVocab(const TokenVocab&) = delete;
  TokenVocab& operator=(const TokenVocab&) = delete;

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool contains(TokenId id) const { return id >= 0 && id < size(); }
  const std::string& text(TokenId id) const;
  TokenType type(TokenId id) const;
  float score(TokenId id) const { return scores_.empty() ? 0.0f : scores_[id]; }
  // -1 when `text` is no token. Duplicate texts resolve to the last id, as in llama.cpp.
  TokenId find(std::string_view text) const;

  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId unk() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  void set_add_bos(bool v) { add_bos_ = v; }
  bool is_eog(TokenId id) const { return eog_.count(id) != 0; }

  // Cuts `text` at occurrences of special-token text, longest token first (llama.cpp's
  // partition). User-defined tokens are always recognised, as Hugging Face does for added
  // tokens that are not "special"; control and unknown tokens only when `parse_special`.
  std::vector<TextFragment> split_special(std::string_view text, bool parse_special) const;

  const std::string& file_name() const { return file_name_; }

 private:
  std::string file_name_;
  std::vector<std::string> texts_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  TextIndex by_text_;
  std::vector<TokenId> special_by_length_;  // control/user-defined/unknown, longest text first
  TokenId bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::unordered_set<TokenId> eog_;
};

// Shared Tokenizer plumbing: metadata getters and decode() built from token_to_piece().
class VocabTokenizer : public Tokenizer {
 public:
  std::string decode(const std::vector<TokenId>& ids, bool special = false) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  TokenId bos() const override { return vocab_.bos(); }
  TokenId eos() const override { return vocab_.eos(); }
  bool is_eog(TokenId id) const override { return vocab_.is_eog(id); }
  const std::string& token_text(TokenId id) const override { return vocab_.text(id); }
  TokenType token_type(TokenId id) const override { return vocab_.type(id); }

 protected:
  VocabTokenizer(const GGUFFile& file, const SpecialTokenDefaults& defaults, bool need_scores)
      : vocab_(file, defaults, need_scores) {}
  // True when encode() puts a space in front of the text (SPM dummy prefix), so decode() must
  // take it off again.
  virtual bool adds_dummy_prefix() const { return false; }

  TokenVocab vocab_;
};

}  // namespace orchard
