#pragma once
// Walks a parsed template and writes its output. Scoping follows Jinja: a `for` body gets a
// fresh scope each iteration (so `set` inside a loop does not leak out, which is why templates
// use namespace()), `if` does not, and a macro sees only its arguments and the top level.
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

#include "serve/jinja/ast.h"
#include "serve/jinja/builtins.h"
#include "serve/jinja/value.h"

namespace orchard::serve::jinja {

class Interpreter {
 public:
  Interpreter(Heap& heap, const std::tm& now);

  void define_global(const std::string& name, Value v);
  std::string run(const Body& program);
  // The line being evaluated when a Failure without one escaped.
  int line() const { return line_; }

 private:
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    bool opaque = false;  // a macro's frame: lookups skip to the top level from here
  };
  enum class Flow { Normal, Break, Continue };

  Heap& heap_;
  Budget& budget_;
  Env env_;
  std::vector<Frame> frames_;  // [0] globals, [1] the template's top level
  std::string* out_ = nullptr;
  int calls_ = 0;
  int line_ = 0;

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  std::string capture(const Body& body);
  void emit(std::string_view text);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value call_macro(const Callable& fn, const Args& args);
  Value eval_binary(const Expr& e);
  Value arithmetic(const std::string& op, const Value& l, const Value& r, const Expr& e);
  Value subscript(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  bool contains(const Value& container, const Value& item);
  Args eval_args(const Expr& e, size_t first);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
};

}  // namespace orchard::serve::jinja
