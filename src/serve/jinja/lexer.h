#pragma once
// Template text -> tokens. Whitespace control is applied here, so the parser only sees text
// that will be printed: `{%-`/`-%}` (and the `{{`/`{#` forms) strip whitespace on that side,
// and, as Hugging Face renders chat templates, trim_blocks (the newline after a block tag or
// comment goes) and lstrip_blocks (spaces and tabs before a block tag on its line go) are on;
// `{%+` / `+%}` turn those two off for one tag.
#include <string>
#include <string_view>
#include <vector>

namespace orchard::serve::jinja {

enum class Tok {
  Text,        // literal template text
  VarOpen,     // {{
  VarClose,    // }}
  BlockOpen,   // {%
  BlockClose,  // %}
  Name,
  String,      // text holds the decoded value
  Int,
  Float,
  Op,          // operator or punctuation: text holds it
  End,
};

struct Token {
  Tok type;
  std::string text;
  int line;
};

// Throws Failure (limits.h) naming the line of an unclosed tag, comment or string, or of a
// character that starts no token. `{% raw %}…{% endraw %}` comes back as one Text token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace orchard::serve::jinja
