#pragma once
// Pre-tokenization for byte-level BPE: the regex splits that tokenizer.ggml.pre selects, applied
// the way llama.cpp and Hugging Face's Split pre-tokenizers do. Each regex in a model's list cuts
// every fragment left by the previous one into matches and the text between them; nothing is
// dropped. Regexes are run by PCRE2 with Unicode properties (\p{L}, \p{N}, \s are Unicode-aware).
//
// Supported tokenizer.ggml.pre values (llama.cpp's names):
//   default                                  (also used when the key is absent)
//   gpt-2, mpt, phi-2, olmo, jais, roberta-bpe, jina-es, jina-de, jina-v1-en, jina-v2-*
//   llama-bpe, llama3, llama-v3, falcon3     (Llama 3 regex; BPE also ignores merges, adds BOS)
//   dbrx, smaug-bpe                          (Llama 3 regex only)
//   qwen2, deepseek-r1-qwen, stablelm2, megrez
//   deepseek-llm, deepseek-coder, falcon
//   starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b
// Any other value is refused with an Error naming it: guessing a regex would silently produce
// token ids the model was not trained on.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orchard {

class PreTokenizer {
 public:
  // `name` is the tokenizer.ggml.pre value ("" when absent); `file` prefixes errors.
  PreTokenizer(const std::string& name, const std::string& file);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Cuts `text` into consecutive pieces that together are exactly `text`.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  // The Llama 3 family looks a whole pre-token up in the vocabulary before merging.
  bool ignore_merges() const { return ignore_merges_; }
  bool adds_bos_by_default() const { return adds_bos_; }

 private:
  class Regex;
  std::string name_;
  std::vector<std::unique_ptr<Regex>> stages_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace orchard
