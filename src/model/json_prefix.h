#pragma once
// Whether text so far can still become one JSON object (RFC 8259, the document an object, as
// OpenAI's JSON mode and Ollama's format "json" give): the state of a pushdown recognizer fed
// byte by byte. Constrained sampling copies it per candidate token to keep only the tokens whose
// text it accepts, and asks for the shortest text that completes the document when the token
// budget runs low.
#include <cstdint>
#include <string>
#include <string_view>

namespace orchard {

class JsonPrefix {
 public:
  // Feeds one byte; false (leaving the state unusable) when no JSON object starts this way.
  bool feed(unsigned char c);
  bool feed(std::string_view s) {
    for (char c : s)
      if (!feed(static_cast<unsigned char>(c))) return false;
    return true;
  }
  // The document is one whole object (only whitespace may follow).
  bool complete() const { return mode_ == Mode::Done; }
  // The shortest text that makes the document complete ("" when it is).
  std::string closing() const;

 private:
  enum class Mode : uint8_t {
    Start,          // before the top-level object
    Value,          // a value must start (after ':' or ',' in an array)
    KeyOrEnd,       // after '{'
    Key,            // after ',' in an object
    Colon,          // after a key
    ValueOrEnd,     // after '['
    AfterValue,     // ',' or the closer
    String,         // inside a string (key_ says which kind)
    Escape,         // after '\' in a string
    Unicode,        // after "\u": hex_ digits read
    Minus,          // number: after '-'
    Zero,           // number: a leading 0
    Int,            // number: integer digits
    Dot,            // number: after '.'
    Frac,           // number: fraction digits
    Exp,            // number: after 'e'
    ExpSign,        // number: after 'e+' / 'e-'
    ExpDigits,      // number: exponent digits
    Literal,        // inside true / false / null: literal_ is what remains
    Done,           // the object closed
  };
  bool value_start(unsigned char c);
  bool after_value(unsigned char c);
  bool utf8(unsigned char c);
  void close_value();

  Mode mode_ = Mode::Start;
  std::string stack_;           // '{' / '[' per open container, innermost last
  bool key_ = false;            // the string being read is an object key
  uint8_t hex_ = 0;             // \u digits read
  uint16_t code_ = 0;           // their value so far
  uint8_t utf8_left_ = 0;       // continuation bytes a multi-byte character still needs
  unsigned char utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the next continuation byte's range
  std::string_view literal_;    // the rest of true / false / null
};

}  // namespace orchard
