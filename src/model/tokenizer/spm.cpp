#include "model/tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "model/gguf.h"
#include "model/tokenizer/utf8.h"
#include "tensor/error.h"

namespace orchard {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

SpecialTokenDefaults spm_defaults() {
  SpecialTokenDefaults d;
  d.unk = 0;
  d.bos = 1;
  d.eos = 2;
  d.add_bos = true;
  d.add_eos = false;
  return d;
}

void append_escaped(std::string_view text, std::string& out) {
  for (char c : text) {
    if (c == ' ')
      out += kSpaceMarker;
    else
      out += c;
  }
}

std::string unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      i += kSpaceMarker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB; -1 when `text` is not in that form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9')
      value |= c - '0';
    else if (c >= 'A' && c <= 'F')
      value |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      value |= c - 'a' + 10;
    else
      return -1;
  }
  return value;
}

}  // namespace

// One UTF-8 character or a merged run of them; symbols form a linked list in text order.
struct SpmSymbol {
  uint32_t begin;
  uint32_t length;  // 0 once merged into the symbol on its left
  int32_t prev;
  int32_t next;
};

struct SpmCandidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // of the merged text: a candidate is stale once either side has changed
};

struct SpmTokenizer::Scratch {
  std::string escaped;
  std::vector<SpmSymbol> symbols;
  std::vector<SpmCandidate> heap;
};

SpmTokenizer::SpmTokenizer(const GGUFFile& file)
    : VocabTokenizer(file, spm_defaults(), /*need_scores=*/true) {
  add_space_prefix_ = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  if (vocab_.add_bos() && vocab_.bos() < 0)
    throw Error(file.path() + ": BOS is to be added but tokenizer.ggml.bos_token_id is missing");

  byte_of_token_.assign(vocab_.size(), -1);
  for (TokenId id = 0; id < vocab_.size(); ++id) {
    if (vocab_.type(id) != TokenType::Byte) continue;
    const int byte = parse_byte_token(vocab_.text(id));
    if (byte < 0)
      throw Error(file.path() + ": tokenizer.ggml.tokens[" + std::to_string(id) + "] = '" +
                  vocab_.text(id) + "' has type BYTE but is not of the form <0xXX>");
    byte_of_token_[id] = static_cast<int16_t>(byte);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    TokenId t = vocab_.find(name);
    if (t < 0) t = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_token_[b] = t;
  }
}

std::vector<TokenId> SpmTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  Scratch scratch;
  bool after_special = true;  // the start of the input counts as following a special token
  for (const TextFragment& fragment : vocab_.split_special(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    scratch.escaped.clear();
    if (add_space_prefix_ && after_special) scratch.escaped += kSpaceMarker;
    append_escaped(fragment.text, scratch.escaped);
    encode_escaped(scratch.escaped, scratch, out);
    after_special = false;
  }
  if (add_special && vocab_.add_eos() && vocab_.eos() >= 0) out.push_back(vocab_.eos());
  return out;
}

void SpmTokenizer::encode_escaped(std::string_view text, Scratch& scratch,
                                  std::vector<TokenId>& out) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  for (size_t offset = 0; offset < text.size();) {
    // Invalid UTF-8 becomes one symbol per byte. (llama.cpp trusts the lead byte, so a cut-off
    // character swallows the next bytes, possibly half of a '▁', and decodes differently.)
    size_t len = 1;
    if (utf8::classify(text.substr(offset), &len) != utf8::Prefix::Complete) len = 1;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(len), index - 1,
                       offset + len < text.size() ? index + 1 : -1});
    offset += len;
  }
  if (symbols.empty()) return;

  // Max-heap on score; among equal scores the leftmost pair first.
  auto worse = [](const SpmCandidate& a, const SpmCandidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  auto& heap = scratch.heap;
  heap.clear();
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const TokenId id = vocab_.find(text.substr(symbols[left].begin, length));
    if (id < 0) return;
    heap.push_back({vocab_.score(id), left, right, length});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const SpmCandidate c = heap.back();
    heap.pop_back();
    SpmSymbol& left = symbols[c.left];
    SpmSymbol& right = symbols[c.right];
    if (left.length == 0 || right.length == 0 || left.next != c.right ||
        left.length + right.length != c.length)
      continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].length);
    const TokenId id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Only single characters can be unknown: every merge produced a vocabulary entry.
    for (char c : piece) {
      const TokenId byte = byte_token_[static_cast<uint8_t>(c)];
      if (byte >= 0) {
        out.push_back(byte);
      } else if (vocab_.unk() >= 0) {
        out.push_back(vocab_.unk());
        break;  // one UNK for the whole character, as SentencePiece without byte fallback does
      }
    }
  }
}

std::string SpmTokenizer::token_to_piece(TokenId id, bool special) const {
  const std::string& text = vocab_.text(id);
  switch (vocab_.type(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
      return special ? text : std::string();
    case TokenType::UserDefined:
      return text;
    case TokenType::Unused:
      return std::string();
    case TokenType::Byte:
      return std::string(1, static_cast<char>(byte_of_token_[id]));
    default:
      return unescape(text);
  }
}

}  // namespace orchard
