#pragma once
// The parsed template: expressions and statements, each remembering its line for errors.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orchard::serve::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Literal {
  enum class Type { None, Bool, Int, Float, String } type = Type::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
};

struct Expr {
  enum class Kind {
    Literal,   // lit
    Name,      // name
    List,      // args: the items (also tuples)
    Dict,      // args: key, value, key, value, …
    Attr,      // args[0].name
    Index,     // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (missing parts are null)
    Call,      // args[0](args[1..]); arg_names[k] names args[k+1] ("" = positional)
    Filter,    // args[0] | name(args[1..])
    Test,      // args[0] is [not] name(args[1..])
    Unary,     // name ("-", "+", "not") args[0]
    Binary,    // args[0] name args[1], name an operator, "in" or "not in"
    And,
    Or,
    Cond,      // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Literal lit;
  std::vector<ExprPtr> args;
  std::vector<std::string> arg_names;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches (a null condition is the else branch)
    For,       // for targets in expr [if cond]: body [else: else_body]
    Set,       // set targets = expr, or set targets[0].attr = expr when attr is not empty
    SetBlock,  // set targets[0]: body (captured as a string)
    Macro,     // macro name(targets = defaults): body
    Break,
    Continue,
    Scope,     // a block that only groups its body ({% generation %})
  };
  struct Branch {
    ExprPtr cond;
    Body body;
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::string attr;
  std::vector<std::string> targets;
  std::vector<ExprPtr> defaults;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<Branch> branches;
  Body body;
  Body else_body;
};

}  // namespace orchard::serve::jinja
