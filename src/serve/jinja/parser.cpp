#include "serve/jinja/parser.h"

#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Text: return "text";
    case Tok::VarOpen: return "'{{'";
    case Tok::VarClose: return "'}}'";
    case Tok::BlockOpen: return "'{%'";
    case Tok::BlockClose: return "'%}'";
    case Tok::Name: return "'" + t.text + "'";
    case Tok::String: return "a string";
    case Tok::Int: case Tok::Float: return "number " + t.text;
    case Tok::Op: return "'" + t.text + "'";
    case Tok::End: return "the end of the template";
  }
  return "?";
}

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : t_(tokens), max_depth_(max_depth) {}

  Body run() { return body({}, "", 0); }

 private:
  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  int max_depth_;

  // Recursion guard: each nested construct (block, parenthesis, operand) costs one level.
  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.depth_ > p.max_depth_) fail("template nests too deeply", p.peek().line);
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  // Left-leaning chains (a + b + c, x.y.z, v | f | g) deepen the tree without recursing here;
  // they count against the same limit, since evaluating and freeing the tree recurses.
  void chain(int& links) const {
    if (depth_ + ++links > max_depth_) fail("template nests too deeply", peek().line);
  }

  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& tk = peek();
    if (p_ + 1 < t_.size()) ++p_;
    return tk;
  }
  bool is_op(std::string_view op, size_t k = 0) const { return peek(k).type == Tok::Op && peek(k).text == op; }
  bool is_name(std::string_view n, size_t k = 0) const { return peek(k).type == Tok::Name && peek(k).text == n; }

  [[noreturn]] void unexpected(const std::string& wanted) const {
    fail("expected " + wanted + " but found " + describe(peek()), peek().line);
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) unexpected("'" + std::string(op) + "'");
    next();
  }
  std::string expect_name() {
    if (peek().type != Tok::Name) unexpected("a name");
    return next().text;
  }
  void expect_close() {
    if (peek().type != Tok::BlockClose) unexpected("'%}'");
    next();
  }

  // Statements up to (not including) a block tag named in `ends`, or to the end of input.
  Body body(std::initializer_list<std::string_view> ends, std::string_view opener, int opener_line) {
    Nest nest(*this);
    Body out;
    for (;;) {
      const Token& tk = peek();
      switch (tk.type) {
        case Tok::End:
          if (ends.size() != 0)
            fail("'" + std::string(opener) + "' opened on line " + std::to_string(opener_line) + " is never closed", tk.line);
          return out;
        case Tok::Text: {
          auto s = make_stmt(Stmt::Kind::Text, tk.line);
          s->text = tk.text;
          out.push_back(std::move(s));
          next();
          break;
        }
        case Tok::VarOpen: {
          next();
          auto s = make_stmt(Stmt::Kind::Output, tk.line);
          s->expr = expression();
          if (peek().type != Tok::VarClose) unexpected("'}}'");
          next();
          out.push_back(std::move(s));
          break;
        }
        case Tok::BlockOpen: {
          const Token& kw = peek(1);
          if (kw.type != Tok::Name) fail("expected a tag name after '{%'", kw.line);
          for (std::string_view e : ends)
            if (kw.text == e) return out;
          next();
          next();
          out.push_back(statement(kw.text, kw.line));
          break;
        }
        default:
          unexpected("text or a tag");
      }
    }
  }

  // Consumes {% name %} (endmacro may repeat the macro's name).
  void end_tag(std::string_view name) {
    if (peek().type != Tok::BlockOpen || !is_name(name, 1)) unexpected("'{% " + std::string(name) + " %}'");
    next();
    next();
    if (peek().type == Tok::Name) next();
    expect_close();
  }

  // Consumes the {% … of a tag `body` stopped at and returns its keyword.
  std::string take_keyword() {
    next();
    return next().text;
  }

  StmtPtr statement(const std::string& kw, int line) {
    if (kw == "if") return if_stmt(line);
    if (kw == "for") return for_stmt(line);
    if (kw == "set") return set_stmt(line);
    if (kw == "macro") return macro_stmt(line);
    if (kw == "break" || kw == "continue") {
      expect_close();
      return make_stmt(kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    if (kw == "generation") {  // Hugging Face's marker for assistant tokens; renders its body
      expect_close();
      auto s = make_stmt(Stmt::Kind::Scope, line);
      s->body = body({"endgeneration"}, "generation", line);
      end_tag("endgeneration");
      return s;
    }
    fail("unknown tag '" + kw + "'", line);
  }

  StmtPtr if_stmt(int line) {
    auto s = make_stmt(Stmt::Kind::If, line);
    ExprPtr cond = expression();
    expect_close();
    for (;;) {
      Body b = body({"elif", "else", "endif"}, "if", line);
      s->branches.push_back(Stmt::Branch{std::move(cond), std::move(b)});
      const std::string kw = take_keyword();
      if (kw == "elif") {
        cond = expression();
        expect_close();
        continue;
      }
      expect_close();
      if (kw == "else") {
        Body e = body({"endif"}, "if", line);
        s->branches.push_back(Stmt::Branch{nullptr, std::move(e)});
        end_tag("endif");
      }
      return s;
    }
  }

  StmtPtr for_stmt(int line) {
    auto s = make_stmt(Stmt::Kind::For, line);
    s->targets.push_back(expect_name());
    while (is_op(",")) {
      next();
      s->targets.push_back(expect_name());
    }
    if (!is_name("in")) unexpected("'in'");
    next();
    s->expr = or_expr();  // not expression(): a trailing `if` filters the loop
    if (is_name("if")) {
      next();
      s->cond = expression();
    }
    if (is_name("recursive")) fail("recursive loops are not supported", peek().line);
    expect_close();
    s->body = body({"else", "endfor"}, "for", line);
    if (take_keyword() == "else") {
      expect_close();
      s->else_body = body({"endfor"}, "for", line);
      end_tag("endfor");
    } else {
      expect_close();
    }
    return s;
  }

  StmtPtr set_stmt(int line) {
    auto s = make_stmt(Stmt::Kind::Set, line);
    s->targets.push_back(expect_name());
    if (is_op(".")) {
      next();
      s->attr = expect_name();
    } else {
      while (is_op(",")) {
        next();
        s->targets.push_back(expect_name());
      }
    }
    if (peek().type == Tok::BlockClose && s->attr.empty() && s->targets.size() == 1) {
      next();
      s->kind = Stmt::Kind::SetBlock;
      s->body = body({"endset"}, "set", line);
      end_tag("endset");
      return s;
    }
    expect_op("=");
    s->expr = expression();
    expect_close();
    return s;
  }

  StmtPtr macro_stmt(int line) {
    auto s = make_stmt(Stmt::Kind::Macro, line);
    s->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      s->targets.push_back(expect_name());
      if (is_op("=")) {
        next();
        s->defaults.push_back(expression());
      } else {
        s->defaults.push_back(nullptr);
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    expect_close();
    s->body = body({"endmacro"}, "macro", line);
    end_tag("endmacro");
    return s;
  }

  ExprPtr expression() {
    Nest nest(*this);
    ExprPtr e = or_expr();
    if (!is_name("if")) return e;
    auto c = make(Expr::Kind::Cond, next().line);
    c->args.push_back(std::move(e));
    c->args.push_back(or_expr());
    if (is_name("else")) {
      next();
      c->args.push_back(expression());
    } else {
      c->args.push_back(nullptr);
    }
    return c;
  }

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    int links = 0;
    while (is_name("or")) {
      chain(links);
      const int line = next().line;
      l = binary(Expr::Kind::Or, "or", std::move(l), and_expr(), line);
    }
    return l;
  }

  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    int links = 0;
    while (is_name("and")) {
      chain(links);
      const int line = next().line;
      l = binary(Expr::Kind::And, "and", std::move(l), not_expr(), line);
    }
    return l;
  }

  ExprPtr not_expr() {
    Nest nest(*this);
    if (!is_name("not")) return compare();
    auto e = make(Expr::Kind::Unary, next().line);
    e->name = "not";
    e->args.push_back(not_expr());
    return e;
  }

  ExprPtr compare() {
    ExprPtr l = math1();
    int links = 0;
    for (;;) {
      chain(links);
      const int line = peek().line;
      std::string op;
      if (peek().type == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        return l;
      }
      l = binary(Expr::Kind::Binary, op, std::move(l), math1(), line);
    }
  }

  template <typename Next>
  ExprPtr left_assoc(std::initializer_list<std::string_view> ops, Next operand) {
    ExprPtr l = (this->*operand)();
    int links = 0;
    for (;;) {
      chain(links);
      bool hit = false;
      for (std::string_view op : ops) hit = hit || is_op(op);
      if (!hit) return l;
      const Token& tk = next();
      l = binary(Expr::Kind::Binary, tk.text, std::move(l), (this->*operand)(), tk.line);
    }
  }

  ExprPtr math1() { return left_assoc({"+", "-"}, &Parser::concat); }
  ExprPtr concat() { return left_assoc({"~"}, &Parser::math2); }
  ExprPtr math2() { return left_assoc({"*", "/", "//", "%"}, &Parser::power); }
  ExprPtr power() { return left_assoc({"**"}, &Parser::filtered_unary); }
  ExprPtr filtered_unary() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& tk = next();
      node = make(Expr::Kind::Unary, tk.line);
      node->name = tk.text;
      node->args.push_back(unary(false));
    } else {
      node = postfix(primary());
    }
    return with_filter ? filters(std::move(node)) : std::move(node);
  }

  ExprPtr primary() {
    const Token& tk = peek();
    switch (tk.type) {
      case Tok::Name: {
        next();
        auto e = make(Expr::Kind::Literal, tk.line);
        if (tk.text == "true" || tk.text == "True" || tk.text == "false" || tk.text == "False") {
          e->lit.type = Literal::Type::Bool;
          e->lit.b = tk.text[0] == 't' || tk.text[0] == 'T';
        } else if (tk.text == "none" || tk.text == "None") {
          e->lit.type = Literal::Type::None;
        } else {
          e->kind = Expr::Kind::Name;
          e->name = tk.text;
        }
        return e;
      }
      case Tok::String: {
        auto e = make(Expr::Kind::Literal, tk.line);
        e->lit.type = Literal::Type::String;
        while (peek().type == Tok::String) e->lit.s += next().text;  // 'a' 'b' is 'ab'
        return e;
      }
      case Tok::Int: case Tok::Float: {
        next();
        auto e = make(Expr::Kind::Literal, tk.line);
        if (tk.type == Tok::Int) {
          e->lit.type = Literal::Type::Int;
          e->lit.i = std::stoll(tk.text);
        } else {
          e->lit.type = Literal::Type::Float;
          e->lit.f = std::strtod(tk.text.c_str(), nullptr);
        }
        return e;
      }
      case Tok::Op:
        if (tk.text == "(") return parenthesized();
        if (tk.text == "[") return sequence("]", Expr::Kind::List);
        if (tk.text == "{") return sequence("}", Expr::Kind::Dict);
        break;
      default:
        break;
    }
    unexpected("an expression");
  }

  // (x) is x; (x,) and (x, y) are tuples, which behave as lists here.
  ExprPtr parenthesized() {
    const int line = next().line;
    if (is_op(")")) {
      next();
      return make(Expr::Kind::List, line);
    }
    ExprPtr first = expression();
    if (!is_op(",")) {
      expect_op(")");
      return first;
    }
    auto e = make(Expr::Kind::List, line);
    e->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      e->args.push_back(expression());
    }
    expect_op(")");
    return e;
  }

  ExprPtr sequence(std::string_view close, Expr::Kind kind) {
    auto e = make(kind, next().line);
    while (!is_op(close)) {
      e->args.push_back(expression());
      if (kind == Expr::Kind::Dict) {
        expect_op(":");
        e->args.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(close);
    return e;
  }

  ExprPtr postfix(ExprPtr node) {
    int links = 0;
    for (;;) {
      chain(links);
      const int line = peek().line;
      if (is_op(".")) {
        next();
        auto e = make(Expr::Kind::Attr, line);
        e->name = expect_name();
        e->args.push_back(std::move(node));
        node = std::move(e);
      } else if (is_op("[")) {
        next();
        node = subscript(std::move(node), line);
      } else if (is_op("(")) {
        next();
        auto e = make(Expr::Kind::Call, line);
        e->args.push_back(std::move(node));
        call_args(*e);
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  ExprPtr subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool slice = false;
    if (!is_op(":")) parts[0] = expression();
    if (is_op(":")) {
      slice = true;
      next();
      if (!is_op(":") && !is_op("]")) parts[1] = expression();
      if (is_op(":")) {
        next();
        if (!is_op("]")) parts[2] = expression();
      }
    }
    expect_op("]");
    auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Index, line);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    if (slice) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }

  // After '(': positional and name=value arguments up to ')'.
  void call_args(Expr& e) {
    while (!is_op(")")) {
      if (peek().type == Tok::Name && is_op("=", 1)) {
        e.arg_names.push_back(next().text);
        next();
      } else {
        e.arg_names.emplace_back();
      }
      e.args.push_back(expression());
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr filters(ExprPtr node) {
    int links = 0;
    for (;;) {
      chain(links);
      const int line = peek().line;
      if (is_op("|")) {
        next();
        auto e = make(Expr::Kind::Filter, line);
        e->name = expect_name();
        e->args.push_back(std::move(node));
        if (is_op("(")) {
          next();
          call_args(*e);
        }
        node = std::move(e);
      } else if (is_name("is")) {
        next();
        auto e = make(Expr::Kind::Test, line);
        if (is_name("not")) {
          next();
          e->negated = true;
        }
        e->name = expect_name();
        e->args.push_back(std::move(node));
        if (is_op("(")) {
          next();
          call_args(*e);
        } else if (peek().type == Tok::String || peek().type == Tok::Int || peek().type == Tok::Float ||
                   is_name("true") || is_name("false") || is_name("none") || is_name("True") ||
                   is_name("False") || is_name("None")) {
          e->arg_names.emplace_back();  // `x is sameas false`, `n is divisibleby 3`
          e->args.push_back(primary());
        }
        node = std::move(e);
      } else {
        return node;
      }
    }
  }
};

}  // namespace

Body parse(const std::vector<Token>& tokens, int max_depth) { return Parser(tokens, max_depth).run(); }

}  // namespace orchard::serve::jinja
