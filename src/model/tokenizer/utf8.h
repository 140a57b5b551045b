#pragma once
// UTF-8 helpers shared by the tokenizers and the detokenizing streamer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace orchard::utf8 {

// Bytes a sequence announces by its first byte. Bytes that cannot start a sequence count as 1,
// so a scan over arbitrary bytes always advances (llama.cpp splits text the same way).
size_t sequence_length(uint8_t lead);

void append_codepoint(std::string& out, uint32_t codepoint);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Classifies the bytes at the start of `s` (which must be non-empty).
enum class Prefix {
  Complete,    // a whole valid character of `length` bytes
  Incomplete,  // a valid beginning that the next bytes may complete
  Invalid,     // the first byte can never be part of valid UTF-8 here; skip `length` = 1
};
Prefix classify(std::string_view s, size_t* length);

}  // namespace orchard::utf8
