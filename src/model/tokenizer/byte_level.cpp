#include "model/tokenizer/byte_level.h"

#include <array>

#include "model/tokenizer/utf8.h"

namespace orchard::byte_level {

namespace {

bool stands_for_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> text_of_byte;
  std::array<int16_t, 512> byte_of_codepoint;  // -1 when the code point is not in the alphabet

  Alphabet() {
    byte_of_codepoint.fill(-1);
    uint32_t next_extra = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t cp = stands_for_itself(b) ? b : next_extra++;
      utf8::append_codepoint(text_of_byte[b], cp);
      byte_of_codepoint[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

const std::string& encode_byte(uint8_t byte) { return alphabet().text_of_byte[byte]; }

void encode(std::string_view bytes, std::string& out) {
  const Alphabet& a = alphabet();
  for (char c : bytes) out += a.text_of_byte[static_cast<uint8_t>(c)];
}

std::string decode(std::string_view text) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = 1;
    const auto kind = utf8::classify(text.substr(i), &len);
    if (kind == utf8::Prefix::Complete) {
      // Alphabet characters are at most U+01FF, i.e. one or two UTF-8 bytes.
      uint32_t cp = static_cast<uint8_t>(text[i]);
      if (len == 2) cp = ((cp & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      if (len <= 2 && cp < a.byte_of_codepoint.size() && a.byte_of_codepoint[cp] >= 0) {
        out += static_cast<char>(a.byte_of_codepoint[cp]);
        i += len;
        continue;
      }
    } else {
      len = kind == utf8::Prefix::Incomplete ? text.size() - i : 1;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace orchard::byte_level
