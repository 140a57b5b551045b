#include "model/json_prefix.h"

namespace orchard {
namespace {

bool space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
int hex_value(unsigned char c) {
  if (digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void JsonPrefix::close_value() { mode_ = stack_.empty() ? Mode::Done : Mode::AfterValue; }

bool JsonPrefix::value_start(unsigned char c) {
  switch (c) {
    case '{':
      stack_ += '{';
      mode_ = Mode::KeyOrEnd;
      return true;
    case '[':
      stack_ += '[';
      mode_ = Mode::ValueOrEnd;
      return true;
    case '"':
      key_ = false;
      mode_ = Mode::String;
      return true;
    case '-':
      mode_ = Mode::Minus;
      return true;
    case 't':
    case 'f':
    case 'n':
      literal_ = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
      mode_ = Mode::Literal;
      return true;
    default:
      if (c == '0') mode_ = Mode::Zero;
      else if (digit(c)) mode_ = Mode::Int;
      else return false;
      return true;
  }
}

bool JsonPrefix::after_value(unsigned char c) {
  if (space(c)) return true;
  const char top = stack_.empty() ? 0 : stack_.back();
  if (c == ',' && top) {
    mode_ = top == '{' ? Mode::Key : Mode::Value;
    return true;
  }
  if ((c == '}' && top == '{') || (c == ']' && top == '[')) {
    stack_.pop_back();
    close_value();
    return true;
  }
  return false;
}

// A continuation byte of a multi-byte UTF-8 character, in the range its lead byte allows (no
// overlong forms, no surrogates, nothing past U+10FFFF: what a strict JSON parser accepts).
bool JsonPrefix::utf8(unsigned char c) {
  if (c < utf8_lo_ || c > utf8_hi_) return false;
  --utf8_left_;
  utf8_lo_ = 0x80;
  utf8_hi_ = 0xBF;
  return true;
}

bool JsonPrefix::feed(unsigned char c) {
  switch (mode_) {
    case Mode::Start:
      if (space(c)) return true;
      return c == '{' && value_start(c);  // the document is an object
    case Mode::Done:
      return space(c);
    case Mode::Value:
      return space(c) || value_start(c);
    case Mode::KeyOrEnd:
    case Mode::Key:
      if (space(c)) return true;
      if (c == '"') {
        key_ = true;
        mode_ = Mode::String;
        return true;
      }
      if (c == '}' && mode_ == Mode::KeyOrEnd) {
        stack_.pop_back();
        close_value();
        return true;
      }
      return false;
    case Mode::Colon:
      if (space(c)) return true;
      if (c != ':') return false;
      mode_ = Mode::Value;
      return true;
    case Mode::ValueOrEnd:
      if (space(c)) return true;
      if (c == ']') {
        stack_.pop_back();
        close_value();
        return true;
      }
      return value_start(c);
    case Mode::AfterValue:
      return after_value(c);
    case Mode::String:
      if (utf8_left_ > 0) return utf8(c);
      if (c == '"') {
        if (key_) {
          key_ = false;
          mode_ = Mode::Colon;
        } else {
          close_value();
        }
        return true;
      }
      if (c == '\\') {
        mode_ = Mode::Escape;
        return true;
      }
      if (c < 0x20) return false;
      if (c < 0x80) return true;
      // A lead byte: how many continuation bytes follow, and the first one's range.
      if (c >= 0xC2 && c <= 0xDF) utf8_left_ = 1;
      else if (c >= 0xE0 && c <= 0xEF) utf8_left_ = 2;
      else if (c >= 0xF0 && c <= 0xF4) utf8_left_ = 3;
      else return false;
      utf8_lo_ = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
      utf8_hi_ = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      return true;
    case Mode::Escape:
      if (c == 'u') {
        hex_ = 0;
        code_ = 0;
        mode_ = Mode::Unicode;
        return true;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') return false;
      mode_ = Mode::String;
      return true;
    case Mode::Unicode: {
      const int v = hex_value(c);
      if (v < 0) return false;
      code_ = static_cast<uint16_t>(code_ << 4 | v);
      ++hex_;
      // Surrogates (U+D800–DFFF) are refused as soon as the first two digits say so: a lone one
      // is invalid and pairs are not needed (any character can be written as UTF-8 instead).
      if (hex_ == 2 && code_ >= 0xD8 && code_ <= 0xDF) return false;
      if (hex_ == 4) mode_ = Mode::String;
      return true;
    }
    case Mode::Minus:
      if (!digit(c)) return false;
      mode_ = c == '0' ? Mode::Zero : Mode::Int;
      return true;
    case Mode::Zero:
    case Mode::Int:
    case Mode::Frac:
    case Mode::ExpDigits:
      if (digit(c) && mode_ != Mode::Zero) return true;
      if (c == '.' && (mode_ == Mode::Zero || mode_ == Mode::Int)) {
        mode_ = Mode::Dot;
        return true;
      }
      if ((c == 'e' || c == 'E') && mode_ != Mode::ExpDigits) {
        mode_ = Mode::Exp;
        return true;
      }
      close_value();  // the number ended: this byte belongs to what follows it
      return after_value(c);
    case Mode::Dot:
      if (!digit(c)) return false;
      mode_ = Mode::Frac;
      return true;
    case Mode::Exp:
      if (c == '+' || c == '-') {
        mode_ = Mode::ExpSign;
        return true;
      }
      [[fallthrough]];
    case Mode::ExpSign:
      if (!digit(c)) return false;
      mode_ = Mode::ExpDigits;
      return true;
    case Mode::Literal:
      if (literal_.empty() || c != static_cast<unsigned char>(literal_.front())) return false;
      literal_.remove_prefix(1);
      if (literal_.empty()) close_value();
      return true;
  }
  return false;
}

std::string JsonPrefix::closing() const {
  std::string out;
  const std::string key_tail = key_ ? ":0" : "";
  switch (mode_) {
    case Mode::Start:
      return "{}";
    case Mode::Done:
      return "";
    case Mode::Value:
    case Mode::Minus:
    case Mode::Dot:
    case Mode::Exp:
    case Mode::ExpSign:
      out = "0";
      break;
    case Mode::Key:
      out = "\"\":0";
      break;
    case Mode::Colon:
      out = ":0";
      break;
    case Mode::String:
      if (utf8_left_ > 0) {
        out += static_cast<char>(utf8_lo_);
        out.append(utf8_left_ - 1, static_cast<char>(0x80));
      }
      out += '"' + key_tail;
      break;
    case Mode::Escape:
      out = "n\"" + key_tail;
      break;
    case Mode::Unicode:
      out.append(4 - hex_, '0');
      out += '"' + key_tail;
      break;
    case Mode::Literal:
      out = std::string(literal_);
      break;
    case Mode::KeyOrEnd:
    case Mode::ValueOrEnd:
    case Mode::AfterValue:
    case Mode::Zero:
    case Mode::Int:
    case Mode::Frac:
    case Mode::ExpDigits:
      break;
  }
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) out += *it == '{' ? '}' : ']';
  return out;
}

}  // namespace orchard
