#include "model/tokenizer/vocab.h"

#include <algorithm>
#include <cstdint>

#include "model/gguf.h"
#include "tensor/error.h"

namespace orchard {

namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";

// Texts that end a turn in the chat formats we know of. The ids are not in the metadata of many
// models, so llama.cpp (issue 9606) and we recognise them by text.
constexpr std::string_view kEndMarkers[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};

std::string count_mismatch(const GGUFFile& file, const char* key, size_t n, size_t n_tokens) {
  return file.path() + ": " + key + " has " + std::to_string(n) + " entries but " + kTokensKey +
         " has " + std::to_string(n_tokens);
}

// Reads an optional id key; values outside the vocabulary (e.g. 0xFFFFFFFF for "none") keep the
// model's default, as llama.cpp does.
TokenId read_id(const GGUFFile& file, const std::string& key, TokenId fallback, int32_t n_tokens) {
  auto v = file.get_int(key);
  if (v && *v >= 0 && *v < n_tokens) return static_cast<TokenId>(*v);
  return fallback >= 0 && fallback < n_tokens ? fallback : -1;
}

}  // namespace

TokenVocab::TokenVocab(const GGUFFile& file, const SpecialTokenDefaults& defaults,
                       bool need_scores)
    : file_name_(file.path()) {
  const auto* tokens = file.get_string_array(kTokensKey);
  if (!tokens || tokens->empty())
    throw Error(file.path() + ": " + kTokensKey + " is missing or empty");
  if (tokens->size() > static_cast<size_t>(INT32_MAX))
    throw Error(file.path() + ": " + kTokensKey + " has too many entries");
  texts_ = *tokens;
  const size_t n = texts_.size();
  const auto n_tokens = static_cast<int32_t>(n);

  types_.assign(n, TokenType::Normal);
  if (const auto* types = file.get_number_array(kTypesKey)) {
    if (types->size() != n) throw Error(count_mismatch(file, kTypesKey, types->size(), n));
    for (size_t i = 0; i < n; ++i) {
      const double t = (*types)[i];
      if (!(t >= 0 && t <= 6) || t != static_cast<int32_t>(t))
        throw Error(file.path() + ": " + kTypesKey + "[" + std::to_string(i) +
                    "] = " + std::to_string(t) + " is not a token type (0..6)");
      types_[i] = static_cast<TokenType>(static_cast<int32_t>(t));
    }
  }

  if (const auto* scores = file.get_number_array(kScoresKey)) {
    if (scores->size() != n) throw Error(count_mismatch(file, kScoresKey, scores->size(), n));
    scores_.assign(scores->begin(), scores->end());
  } else if (need_scores) {
    throw Error(file.path() + ": " + kScoresKey + " is missing (needed by the SPM tokenizer)");
  }

  by_text_.build(texts_);

  bos_ = read_id(file, "tokenizer.ggml.bos_token_id", defaults.bos, n_tokens);
  eos_ = read_id(file, "tokenizer.ggml.eos_token_id", defaults.eos, n_tokens);
  unk_ = read_id(file, "tokenizer.ggml.unknown_token_id", defaults.unk, n_tokens);
  const TokenId eot = read_id(file, "tokenizer.ggml.eot_token_id", -1, n_tokens);
  const TokenId eom = read_id(file, "tokenizer.ggml.eom_token_id", -1, n_tokens);
  add_bos_ = file.get_bool("tokenizer.ggml.add_bos_token").value_or(defaults.add_bos);
  add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token").value_or(defaults.add_eos);

  for (TokenId id : {eos_, eot, eom})
    if (id >= 0) eog_.insert(id);
  for (TokenId id = 0; id < n_tokens; ++id) {
    const TokenType t = types_[id];
    if (t != TokenType::Control && t != TokenType::UserDefined) continue;
    for (std::string_view marker : kEndMarkers)
      if (texts_[id] == marker) eog_.insert(id);
  }

  for (TokenId id = 0; id < n_tokens; ++id) {
    const TokenType t = types_[id];
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) &&
        !texts_[id].empty())
      special_by_length_.push_back(id);
  }
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(),
                   [&](TokenId a, TokenId b) { return texts_[a].size() > texts_[b].size(); });
}

const std::string& TokenVocab::text(TokenId id) const {
  if (!contains(id))
    throw Error(file_name_ + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(size()));
  return texts_[id];
}

TokenType TokenVocab::type(TokenId id) const {
  if (!contains(id))
    throw Error(file_name_ + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(size()));
  return types_[id];
}

TokenId TokenVocab::find(std::string_view text) const {
  return by_text_.find(text);
}

std::vector<TextFragment> TokenVocab::split_special(std::string_view text,
                                                    bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, -1});
  std::vector<TextFragment> next;
  for (TokenId id : special_by_length_) {
    if (!parse_special && types_[id] != TokenType::UserDefined) continue;
    const std::string_view needle = texts_[id];
    // Most tokens occur nowhere; checking first keeps the common case to a scan per token.
    const bool occurs = std::any_of(fragments.begin(), fragments.end(), [&](const TextFragment& f) {
      return f.token < 0 && f.text.find(needle) != std::string_view::npos;
    });
    if (!occurs) continue;
    next.clear();
    for (const TextFragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t pos; (pos = rest.find(needle)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({rest.substr(0, pos), -1});
        next.push_back({rest.substr(pos, needle.size()), id});
        rest.remove_prefix(pos + needle.size());
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

std::string VocabTokenizer::decode(const std::vector<TokenId>& ids, bool special) const {
  std::string out;
  // The dummy prefix sits on the first token that is text; BOS and other control tokens in
  // front of it do not count.
  bool strip_space = adds_dummy_prefix();
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, special);
    if (strip_space && vocab_.type(id) != TokenType::Control) {
      if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      strip_space = false;
    }
    out += piece;
  }
  return out;
}

}  // namespace orchard
