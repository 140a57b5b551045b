#include <cstdio>
#include <set>
#include <sstream>

#include "model/synthetic/synthetic.h"
#include "model/tokenizer/tokenizer.h"
#include "tensor/error.h"

namespace orchard {
namespace {

// Common English words, most frequent first, so short real text tokenizes into whole words.
constexpr const char* kWords =
    "the of and to a in is it you that he was for on are with as I his they be at one have this "
    "from or had by not word but what some we can out other were all there when up use your how "
    "said an each she which do their time if will way about many then them write would like so "
    "these her long make thing see him two has look more day could go come did number sound no "
    "most people my over know water than call first who may down side been now find any new work "
    "part take get place made live where after back little only round man year came show every "
    "good me give our under name very through just form sentence great think say help low line "
    "differ turn cause much mean before move right boy old too same tell does set three want air "
    "well also play small end put home read hand port large spell add even land here must big "
    "high such follow act why ask men change went light kind off need house picture try us again "
    "animal point mother world near build self earth father head stand own page should country "
    "found answer school grow study still learn plant cover food sun four between state keep eye "
    "never last let thought city tree cross farm hard start might story saw far sea draw left late "
    "run while press close night real life few north open seem together next white children begin "
    "got walk example ease paper group always music those both mark often letter until mile river "
    "car feet care second book carry took science eat room friend began idea fish mountain stop "
    "once base hear horse cut sure watch color face wood main enough plain girl usual young ready "
    "above ever red list though feel talk bird soon body dog family direct pose leave song measure "
    "door product black short numeral class wind question happen complete ship area half rock "
    "order fire south problem piece told knew pass since top whole king space heard best hour "
    "better true during hundred five remember step early hold west ground interest reach fast verb "
    "sing listen six table travel less morning ten simple several vowel toward war lay against "
    "pattern slow center love person money serve appear road map rain rule govern pull cold notice "
    "voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star "
    "box noun field rest correct able pound done beauty drive stood contain front teach week final "
    "gave green oh quick develop ocean warm free minute strong special mind behind clear tail "
    "produce fact street inch multiply nothing course stay wheel full force blue object decide "
    "surface deep moon island foot system busy test record boat common gold possible plane stead "
    "dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire "
    "bring yes distant fill east paint language among model cluster machine orchard token";

void add(Vocabulary& v, const std::string& piece, float score, TokenType type) {
  v.tokens.push_back(piece);
  v.scores.push_back(score);
  v.types.push_back(static_cast<int32_t>(type));
}

}  // namespace

Vocabulary make_vocabulary(int64_t n_vocab) {
  const std::string space = "\xE2\x96\x81";  // ▁ U+2581, SentencePiece's visible space
  Vocabulary v;
  add(v, "<unk>", 0, TokenType::Unknown);
  add(v, "<s>", 0, TokenType::Control);
  add(v, "</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(v, buf, 0, TokenType::Byte);
  }
  if (n_vocab < static_cast<int64_t>(v.tokens.size()) + 96)
    throw Error("a vocabulary needs at least " + std::to_string(v.tokens.size() + 96) + " entries");

  std::set<std::string> seen;
  float score = -1;
  auto add_piece = [&](const std::string& piece) {
    if (static_cast<int64_t>(v.tokens.size()) >= n_vocab || !seen.insert(piece).second) return;
    add(v, piece, score, TokenType::Normal);
    score -= 1;  // earlier (more common) pieces merge first
  };
  add_piece(space);
  for (char c = 0x21; c < 0x7F; ++c) add_piece(std::string(1, c));
  // A word enters with every prefix of "▁word", so merging left to right always reaches it.
  auto add_word = [&](const std::string& w) {
    const std::string full = space + w;
    for (size_t len = space.size() + 1; len <= full.size(); ++len) add_piece(full.substr(0, len));
  };
  std::istringstream words(kWords);
  std::vector<std::string> list;
  for (std::string w; words >> w;) list.push_back(w);
  for (const auto& w : list) add_word(w);
  for (auto w : list) {
    w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    add_word(w);
  }
  // Then made-up words from syllables, deterministic, until the vocabulary is full.
  const char* onsets[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
                          "br", "st", "tr", "pl", "sh", "ch"};
  const char* vowels[] = {"a", "e", "i", "o", "u", "ai", "ou"};
  const char* codas[] = {"", "n", "r", "s", "t", "l", "m"};
  for (int syllables = 1; static_cast<int64_t>(v.tokens.size()) < n_vocab && syllables <= 4; ++syllables) {
    uint64_t count = 1;
    for (int s = 0; s < syllables; ++s) count *= 20 * 7 * 7;
    for (uint64_t i = 0; i < count && static_cast<int64_t>(v.tokens.size()) < n_vocab; ++i) {
      std::string w;
      uint64_t k = i * 2654435761ULL % count;  // spread across the space, not alphabetical
      for (int s = 0; s < syllables; ++s) {
        w += onsets[k % 20];
        k /= 20;
        w += vowels[k % 7];
        k /= 7;
        w += codas[k % 7];
        k /= 7;
      }
      add_word(w);
    }
  }
  if (static_cast<int64_t>(v.tokens.size()) != n_vocab)
    throw Error("could not generate a vocabulary of " + std::to_string(n_vocab) + " entries");
  return v;
}

}  // namespace orchard
