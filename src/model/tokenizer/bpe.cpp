#include "model/tokenizer/bpe.h"

#include <algorithm>

#include "model/gguf.h"
#include "model/tokenizer/byte_level.h"
#include "tensor/error.h"

namespace orchard {

namespace {

constexpr const char* kMergesKey = "tokenizer.ggml.merges";

}  // namespace

// A run of input bytes that is one symbol so far; symbols form a linked list in text order.
struct BpeSymbol {
  uint32_t begin;
  uint32_t length;  // 0 once merged into the symbol on its left
  int32_t id;       // symbol id, -1 when the text is no token and no merge operand
  int32_t prev;
  int32_t next;
};

// A merge that was possible when it was queued; it is stale if either side changed since.
struct BpeCandidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};

struct BpeTokenizer::Scratch {
  std::vector<BpeSymbol> symbols;
  std::vector<BpeCandidate> heap;
  std::string alphabet_text;
};

BpeTokenizer::BpeTokenizer(const GGUFFile& file)
    : VocabTokenizer(file, SpecialTokenDefaults{}, /*need_scores=*/false),
      pre_(file.get_string("tokenizer.ggml.pre").value_or(""), file.path()) {
  if (pre_.adds_bos_by_default() && !file.get_bool("tokenizer.ggml.add_bos_token"))
    vocab_.set_add_bos(true);
  if (vocab_.add_bos() && vocab_.bos() < 0)
    throw Error(file.path() + ": BOS is to be added but tokenizer.ggml.bos_token_id is missing");

  const auto* merges = file.get_string_array(kMergesKey);
  if (!merges) throw Error(file.path() + ": " + kMergesKey + " is missing (needed by BPE)");
  merges_.reserve(merges->size());
  std::string joined;
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& merge = (*merges)[i];
    // The first operand may itself be a space (in vocabularies that are not byte-level), hence
    // the search from 1, as llama.cpp does.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 >= merge.size())
      throw Error(file.path() + ": " + kMergesKey + "[" + std::to_string(i) + "] = '" + merge +
                  "' is not two symbols separated by a space");
    const std::string_view left_text = std::string_view(merge).substr(0, space);
    const std::string_view right_text = std::string_view(merge).substr(space + 1);
    const int32_t left = symbol_id(left_text);
    const int32_t right = symbol_id(right_text);
    joined.assign(left_text);
    joined.append(right_text);
    const int32_t result = symbol_id(joined);
    // A repeated pair keeps its first (best) rank.
    merges_.insert(left, right, Merge{static_cast<int32_t>(i), result});
  }

  for (int b = 0; b < 256; ++b) {
    const std::string& text = byte_level::encode_byte(static_cast<uint8_t>(b));
    byte_token_[b] = vocab_.find(text);
    if (byte_token_[b] >= 0) {
      byte_symbol_[b] = byte_token_[b];
    } else {
      auto it = extra_symbols_.find(text);
      byte_symbol_[b] = it == extra_symbols_.end() ? -1 : it->second;
    }
  }
}

int32_t BpeTokenizer::symbol_id(std::string_view text) {
  const TokenId id = vocab_.find(text);
  if (id >= 0) return id;
  const auto next = static_cast<int32_t>(vocab_.size() + extra_symbols_.size());
  return extra_symbols_.try_emplace(std::string(text), next).first->second;
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  Scratch scratch;
  for (const TextFragment& fragment : vocab_.split_special(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      continue;
    }
    for (std::string_view piece : pre_.split(fragment.text)) encode_piece(piece, scratch, out);
  }
  if (add_special && vocab_.add_eos() && vocab_.eos() >= 0) out.push_back(vocab_.eos());
  return out;
}

void BpeTokenizer::encode_piece(std::string_view bytes, Scratch& scratch,
                                std::vector<TokenId>& out) const {
  if (bytes.empty()) return;
  if (pre_.ignore_merges()) {
    scratch.alphabet_text.clear();
    byte_level::encode(bytes, scratch.alphabet_text);
    const TokenId whole = vocab_.find(scratch.alphabet_text);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }

  auto& symbols = scratch.symbols;
  symbols.clear();
  const auto n = static_cast<int32_t>(bytes.size());
  for (int32_t i = 0; i < n; ++i)
    symbols.push_back({static_cast<uint32_t>(i), 1, byte_symbol_[static_cast<uint8_t>(bytes[i])],
                       i - 1, i + 1 < n ? i + 1 : -1});

  // Min-heap on (rank, left position): the best merge first, leftmost among equals.
  auto worse = [](const BpeCandidate& a, const BpeCandidate& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  auto& heap = scratch.heap;
  heap.clear();
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[left].id, right_id = symbols[right].id;
    if (left_id < 0 || right_id < 0) return;
    const Merge* merge = merges_.find(left_id, right_id);
    if (!merge) return;
    heap.push_back({merge->rank, left, right, left_id, right_id, merge->result});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 1; i < n; ++i) consider(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const BpeCandidate c = heap.back();
    heap.pop_back();
    BpeSymbol& left = symbols[c.left];
    BpeSymbol& right = symbols[c.right];
    if (left.length == 0 || right.length == 0 || left.next != c.right || left.id != c.left_id ||
        right.id != c.right_id)
      continue;
    left.length += right.length;
    left.id = c.result;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const BpeSymbol& s = symbols[i];
    if (s.id >= 0 && s.id < vocab_.size())
      out.push_back(s.id);
    else
      emit_bytes(bytes.substr(s.begin, s.length), out);
  }
}

void BpeTokenizer::emit_bytes(std::string_view bytes, std::vector<TokenId>& out) const {
  for (char c : bytes) {
    const TokenId t = byte_token_[static_cast<uint8_t>(c)];
    if (t >= 0)
      out.push_back(t);
    else if (vocab_.unk() >= 0)
      out.push_back(vocab_.unk());
    // else: the vocabulary cannot express this byte at all; it is dropped.
  }
}

std::string BpeTokenizer::token_to_piece(TokenId id, bool special) const {
  const std::string& text = vocab_.text(id);
  switch (vocab_.type(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
      return special ? text : std::string();
    case TokenType::UserDefined:
      return text;  // added tokens are stored as plain text, not in the byte-level alphabet
    case TokenType::Unused:
      return std::string();
    default:
      return byte_level::decode(text);
  }
}

}  // namespace orchard
