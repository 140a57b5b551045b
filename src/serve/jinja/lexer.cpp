#include "serve/jinja/lexer.h"

#include <algorithm>
#include <charconv>

#include "model/tokenizer/utf8.h"
#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int count_lines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// An escape's code point as UTF-8; surrogates and values past U+10FFFF become U+FFFD.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  utf8::append_codepoint(out, cp);
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      const size_t text_end = open == std::string_view::npos ? src_.size() : open;
      const char kind = open == std::string_view::npos ? '\0' : src_[open + 1];
      const char mod = open != std::string_view::npos && open + 2 < src_.size() ? src_[open + 2] : '\0';
      const bool block_like = kind == '%' || kind == '#';
      emit_text(pos_, text_end, mod == '-', block_like && mod != '+' && mod != '-');
      if (open == std::string_view::npos) break;
      pos_ = open + 2;
      if (mod == '-' || (block_like && mod == '+')) ++pos_;
      if (kind == '#') comment();
      else tag(kind == '%');
    }
    out_.push_back(Token{Tok::End, "", line_});
    return std::move(out_);
  }

 private:
  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
  bool strip_next_ = false;   // the previous tag ended with '-'
  bool trim_newline_ = false; // the previous tag was a block or comment (trim_blocks)

  size_t find_open(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string_view::npos; p = src_.find('{', p + 1))
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    return std::string_view::npos;
  }

  void emit_text(size_t begin, size_t end, bool rstrip, bool lstrip_line) {
    std::string_view t = src_.substr(begin, end - begin);
    const int start_line = line_;
    line_ += count_lines(t);
    if (strip_next_) {
      while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
    } else if (trim_newline_) {
      if (t.substr(0, 1) == "\n") t.remove_prefix(1);
      else if (t.substr(0, 2) == "\r\n") t.remove_prefix(2);
    }
    strip_next_ = trim_newline_ = false;
    if (rstrip) {
      while (!t.empty() && is_space(t.back())) t.remove_suffix(1);
    } else if (lstrip_line) {
      // Only when the tag is the first thing on its line.
      const size_t nl = t.rfind('\n');
      const size_t from = nl == std::string_view::npos ? 0 : nl + 1;
      const char* line_begin = t.data() + from;
      const bool at_line_start = nl != std::string_view::npos || line_begin == src_.data() || line_begin[-1] == '\n';
      if (at_line_start && std::all_of(t.begin() + static_cast<long>(from), t.end(),
                                       [](char c) { return c == ' ' || c == '\t'; }))
        t = t.substr(0, from);
    }
    if (!t.empty()) out_.push_back(Token{Tok::Text, std::string(t), start_line});
  }

  void comment() {
    const int open_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) fail("unclosed comment", open_line);
    line_ += count_lines(src_.substr(pos_, end - pos_));
    const char before = end > pos_ ? src_[end - 1] : '\0';
    strip_next_ = before == '-';
    trim_newline_ = before != '-' && before != '+';
    pos_ = end + 2;
  }

  // Reads the tokens of one {{ … }} or {% … %} up to its closing delimiter.
  void tag(bool block) {
    const int open_line = line_;
    const size_t first = out_.size();
    out_.push_back(Token{block ? Tok::BlockOpen : Tok::VarOpen, "", line_});
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) fail(block ? "unclosed '{%' tag" : "unclosed '{{' tag", open_line);
      const std::string_view rest = src_.substr(pos_);
      const std::string_view close = block ? "%}" : "}}";
      const char m = rest[0];
      if ((m == '-' || (block && m == '+')) && rest.substr(1, 2) == close && (block || depth == 0)) {
        finish_tag(block, m, 3);
        break;
      }
      if (rest.substr(0, 2) == close && (block || depth == 0)) {
        finish_tag(block, '\0', 2);
        break;
      }
      token(depth);
    }
    if (block && out_.size() == first + 3 && out_[first + 1].type == Tok::Name && out_[first + 1].text == "raw")
      raw(first);
  }

  void finish_tag(bool block, char mod, size_t len) {
    out_.push_back(Token{block ? Tok::BlockClose : Tok::VarClose, "", line_});
    pos_ += len;
    strip_next_ = mod == '-';
    trim_newline_ = block && mod == '\0';
  }

  // {% raw %}: everything up to {% endraw %} is text, tags included.
  void raw(size_t first) {
    out_.resize(first);
    const int open_line = line_;
    for (size_t p = src_.find("{%", pos_); p != std::string_view::npos; p = src_.find("{%", p + 2)) {
      size_t q = p + 2;
      const bool rstrip = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.substr(q, 6) != "endraw") continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char mod = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) mod = src_[q++];
      if (src_.substr(q, 2) != "%}") continue;
      emit_text(pos_, p, rstrip, !rstrip);
      line_ += count_lines(src_.substr(p, q + 2 - p));
      pos_ = q + 2;
      strip_next_ = mod == '-';
      trim_newline_ = mod == '\0';
      return;
    }
    fail("'raw' block is never closed with 'endraw'", open_line);
  }

  void token(int& depth) {
    const char c = src_[pos_];
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      out_.push_back(Token{Tok::Name, std::string(src_.substr(pos_, e - pos_)), line_});
      pos_ = e;
    } else if (is_digit(c)) {
      number();
    } else if (c == '\'' || c == '"') {
      string(c);
    } else {
      static constexpr std::string_view two[] = {"**", "//", "==", "!=", "<=", ">="};
      for (std::string_view op : two) {
        if (src_.substr(pos_, 2) == op) {
          out_.push_back(Token{Tok::Op, std::string(op), line_});
          pos_ += 2;
          return;
        }
      }
      if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
        fail(std::string("unexpected character '") + c + "' in a tag", line_);
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      out_.push_back(Token{Tok::Op, std::string(1, c), line_});
      ++pos_;
    }
  }

  void number() {
    size_t e = pos_;
    while (e < src_.size() && is_digit(src_[e])) ++e;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      while (e < src_.size() && is_digit(src_[e])) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t d = e + 1;
      if (d < src_.size() && (src_[d] == '+' || src_[d] == '-')) ++d;
      if (d < src_.size() && is_digit(src_[d])) {
        is_float = true;
        e = d;
        while (e < src_.size() && is_digit(src_[e])) ++e;
      }
    }
    const std::string text(src_.substr(pos_, e - pos_));
    if (!is_float) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size()) fail("integer literal " + text + " is too large", line_);
    }
    out_.push_back(Token{is_float ? Tok::Float : Tok::Int, text, line_});
    pos_ = e;
  }

  void string(char quote) {
    const int open_line = line_;
    std::string value;
    size_t p = pos_ + 1;
    for (;;) {
      if (p >= src_.size()) fail("unterminated string literal", open_line);
      const char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || p + 1 >= src_.size()) {
        value += c;
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case '\\': case '\'': case '"': value += e; break;
        case '\n': ++line_; break;  // a line continuation
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          auto [end, ec] = std::from_chars(src_.data() + p, src_.data() + std::min(src_.size(), p + n), cp, 16);
          if (ec != std::errc() || end != src_.data() + p + n) fail("bad \\" + std::string(1, e) + " escape in a string", line_);
          append_utf8(value, cp);
          p += n;
          break;
        }
        default:  // Python keeps unknown escapes as written
          value += '\\';
          value += e;
      }
    }
    out_.push_back(Token{Tok::String, std::move(value), open_line});
    pos_ = p + 1;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace orchard::serve::jinja
