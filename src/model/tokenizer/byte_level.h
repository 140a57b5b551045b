#pragma once
// GPT-2's byte-level alphabet: every byte is shown as a printable Unicode character so that a
// BPE vocabulary of strings can hold arbitrary bytes. Printable Latin-1 bytes stand for
// themselves; the others (controls, space, 0x7F-0xA0, soft hyphen) become U+0100 onwards in byte
// order, so ' ' is 'Ġ' (U+0120) and '\n' is 'Ċ' (U+010A).
#include <cstdint>
#include <string>
#include <string_view>

namespace orchard::byte_level {

// The UTF-8 text of the character that stands for `byte`.
const std::string& encode_byte(uint8_t byte);
// Appends the encoding of every byte of `bytes`.
void encode(std::string_view bytes, std::string& out);
// Maps byte-level text back to bytes. Characters outside the alphabet (added tokens that were
// stored as plain text) are copied through unchanged.
std::string decode(std::string_view text);

}  // namespace orchard::byte_level
