#pragma once
// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama", with
// byte fallback) and GPT-2-style byte-level BPE ("gpt2", with the pre-tokenizer selected by
// tokenizer.ggml.pre).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orchard {

class GGUFFile;

using TokenId = int32_t;

// Token types as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer a GGUF file describes; throws orchard::Error naming the key at fault.
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& file);

  // add_special: prepend BOS (and append EOS) where the vocabulary asks for it.
  // parse_special: recognise control/user-defined token text (e.g. "<|eot_id|>") in `text`.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special,
                                      bool parse_special = false) const = 0;

  // The bytes of one token as it appears in text (SPM: '▁' -> ' ', <0xAB> -> byte; BPE: the
  // byte-level alphabet mapped back to bytes). Control tokens give "" unless `special`.
  virtual std::string token_to_piece(TokenId id, bool special = false) const = 0;
  // Concatenation of pieces; SPM drops the leading space the encoder added.
  virtual std::string decode(const std::vector<TokenId>& ids, bool special = false) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual TokenId bos() const = 0;   // -1 when none
  virtual TokenId eos() const = 0;   // -1 when none
  virtual bool is_eog(TokenId id) const = 0;  // end of generation (EOS, EOT, <|im_end|>, …)
  virtual const std::string& token_text(TokenId id) const = 0;  // raw vocabulary entry
  virtual TokenType token_type(TokenId id) const = 0;
};

// Streams detokenized text as valid UTF-8: bytes of a multi-byte character split across
// tokens are held back until the character is complete.
class Utf8Streamer {
 public:
  // Appends a token's bytes; returns the longest prefix of pending text that is complete UTF-8.
  std::string push(std::string_view bytes);
  // Whatever is left at the end (invalid sequences become U+FFFD).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace orchard
