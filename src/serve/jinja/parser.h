#pragma once
// Tokens -> statements. Operator precedence follows Jinja's own parser (lowest first):
// `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +,
// then a primary with its `.attr`, `[i]`, `[a:b:c]`, `(args)` and `| filter` / `is test`.
// So `'a' + x | trim` trims x alone and `not x is defined` is `not (x is defined)`.
#include <vector>

#include "serve/jinja/ast.h"
#include "serve/jinja/lexer.h"

namespace orchard::serve::jinja {

// Throws Failure naming the line of the first syntax error, an unknown or unbalanced tag, or
// nesting deeper than max_depth (which keeps the recursive descent off the stack's edge).
Body parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace orchard::serve::jinja
