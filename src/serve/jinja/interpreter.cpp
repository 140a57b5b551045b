#include "serve/jinja/interpreter.h"

#include <cmath>
#include <limits>

#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {
namespace {

// Python's floor division and modulo (the result takes the divisor's sign).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Operations on big strings and lists cost time in proportion to their size; charging for
// the operands keeps a loop over a huge value from running unbounded on a single step each.
size_t cost_of(const Value& v) {
  switch (v.kind) {
    case Kind::String: return v.str().size() / 256;
    case Kind::List: return v.list->items.size() / 8;
    case Kind::Dict: return v.dict->items.size() / 8;
    default: return 0;
  }
}

size_t cost_of(const Args& a) {
  size_t n = 0;
  for (const Value& v : a.positional) n += cost_of(v);
  for (const auto& kv : a.named) n += cost_of(kv.second);
  return n;
}

std::string describe_operand(const Expr& e, const Value& v) {
  if (v.kind == Kind::Undefined && e.kind == Expr::Kind::Name) return "'" + e.name + "' (undefined)";
  if (v.kind == Kind::Undefined && e.kind == Expr::Kind::Attr) return "'." + e.name + "' (undefined)";
  return kind_name(v.kind);
}

}  // namespace

Interpreter::Interpreter(Heap& heap, const std::tm& now)
    : heap_(heap), budget_(heap.budget()), env_{heap, now}, frames_(2) {
  for (const std::string& name : function_names()) define_global(name, Value::of(heap_.callable(name, nullptr)));
}

void Interpreter::define_global(const std::string& name, Value v) { frames_[0].vars[name] = v; }

std::string Interpreter::run(const Body& program) {
  std::string out;
  out_ = &out;
  if (exec(program) != Flow::Normal) fail("'break' or 'continue' outside a loop");
  return out;
}

void Interpreter::emit(std::string_view text) {
  if (out_->size() + text.size() > budget_.limits().max_output)
    fail("template output exceeds " + std::to_string(budget_.limits().max_output) + " bytes");
  out_->append(text);
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  budget_.step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::Text: emit(s.text); break;
    case Stmt::Kind::Output: {
      const Value v = eval(*s.expr);
      if (v.kind == Kind::String) emit(v.str());
      else emit(to_string(v, budget_));
      break;
    }
    case Stmt::Kind::If:
      for (const Stmt::Branch& b : s.branches)
        if (!b.cond || truthy(eval(*b.cond))) return exec(b.body);
      break;
    case Stmt::Kind::For: exec_for(s); break;
    case Stmt::Kind::Set: exec_set(s); break;
    case Stmt::Kind::SetBlock: assign(s.targets[0], heap_.str(capture(s.body))); break;
    case Stmt::Kind::Macro: assign(s.name, Value::of(heap_.callable(s.name, &s))); break;
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::Scope: return exec(s.body);
  }
  return Flow::Normal;
}

std::string Interpreter::capture(const Body& body) {
  std::string text;
  std::string* saved = out_;
  out_ = &text;
  const Flow f = exec(body);
  out_ = saved;
  if (f != Flow::Normal) fail("'break' or 'continue' outside a loop");
  return text;
}

void Interpreter::exec_for(const Stmt& s) {
  const std::vector<Value> all = iterate(heap_, eval(*s.expr));
  auto bind = [&](Frame& frame, const Value& item) {
    if (s.targets.size() == 1) {
      frame.vars[s.targets[0]] = item;
      return;
    }
    if (item.kind != Kind::List || item.list->items.size() != s.targets.size())
      fail("cannot unpack a " + std::string(kind_name(item.kind)) + " into " + std::to_string(s.targets.size()) + " loop variables");
    for (size_t k = 0; k < s.targets.size(); ++k) frame.vars[s.targets[k]] = item.list->items[k];
  };
  // A loop filter (`for x in xs if cond`) picks items before loop.index and friends count.
  std::vector<Value> items;
  if (s.cond) {
    for (const Value& item : all) {
      budget_.step();
      frames_.emplace_back();
      bind(frames_.back(), item);
      const bool keep = truthy(eval(*s.cond));
      frames_.pop_back();
      if (keep) items.push_back(item);
    }
  } else {
    items = all;
  }
  if (items.empty()) {
    exec(s.else_body);
    return;
  }
  Dict* loop = heap_.dict();
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    budget_.step();
    heap_.set(loop, "index", Value::integer(k + 1));
    heap_.set(loop, "index0", Value::integer(k));
    heap_.set(loop, "revindex", Value::integer(n - k));
    heap_.set(loop, "revindex0", Value::integer(n - k - 1));
    heap_.set(loop, "first", Value::boolean(k == 0));
    heap_.set(loop, "last", Value::boolean(k == n - 1));
    heap_.set(loop, "length", Value::integer(n));
    heap_.set(loop, "previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value());
    heap_.set(loop, "nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value());
    frames_.emplace_back();
    bind(frames_.back(), items[static_cast<size_t>(k)]);
    frames_.back().vars["loop"] = Value::of(loop);
    const Flow f = exec(s.body);
    frames_.pop_back();
    if (f == Flow::Break) break;
  }
}

void Interpreter::exec_set(const Stmt& s) {
  const Value v = eval(*s.expr);
  if (!s.attr.empty()) {
    const Value target = lookup(s.targets[0]);
    if (target.kind != Kind::Dict || !target.dict->is_namespace)
      fail("cannot set attribute '" + s.attr + "' of '" + s.targets[0] + "' (" + kind_name(target.kind) +
           "); only a namespace() takes attributes");
    heap_.set(target.dict, s.attr, v);
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], v);
    return;
  }
  if (v.kind != Kind::List || v.list->items.size() != s.targets.size())
    fail("cannot unpack a " + std::string(kind_name(v.kind)) + " into " + std::to_string(s.targets.size()) + " names");
  for (size_t k = 0; k < s.targets.size(); ++k) assign(s.targets[k], v.list->items[k]);
}

Value Interpreter::lookup(const std::string& name) const {
  for (size_t k = frames_.size(); k-- > 0;) {
    auto it = frames_[k].vars.find(name);
    if (it != frames_[k].vars.end()) return it->second;
    if (frames_[k].opaque && k > 2) k = 2;  // skip the callers' frames: next are [1] and [0]
  }
  return Value();
}

void Interpreter::assign(const std::string& name, Value v) { frames_.back().vars[name] = v; }

Args Interpreter::eval_args(const Expr& e, size_t first) {
  Args a;
  for (size_t k = first; k < e.args.size(); ++k) {
    const std::string& name = e.arg_names[k - first];
    if (name.empty()) a.positional.push_back(eval(*e.args[k]));
    else a.named.emplace_back(name, eval(*e.args[k]));
  }
  return a;
}

Value Interpreter::eval(const Expr& e) {
  budget_.step();
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::Literal:
      switch (e.lit.type) {
        case Literal::Type::None: return Value::none();
        case Literal::Type::Bool: return Value::boolean(e.lit.b);
        case Literal::Type::Int: return Value::integer(e.lit.i);
        case Literal::Type::Float: return Value::number(e.lit.f);
        case Literal::Type::String: return Value::string(&e.lit.s);
      }
      return Value();
    case Expr::Kind::Name: return lookup(e.name);
    case Expr::Kind::List: {
      List* l = heap_.list();
      for (const ExprPtr& item : e.args) heap_.push(l, eval(*item));
      return Value::of(l);
    }
    case Expr::Kind::Dict: {
      Dict* d = heap_.dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k]);
        heap_.set(d, to_string(key, budget_), eval(*e.args[k + 1]));
      }
      return Value::of(d);
    }
    case Expr::Kind::Attr: return get_attr(eval(*e.args[0]), e.name);
    case Expr::Kind::Index: {
      const Value obj = eval(*e.args[0]);
      budget_.step(cost_of(obj));
      return subscript(obj, eval(*e.args[1]));
    }
    case Expr::Kind::Slice: {
      const Value obj = eval(*e.args[0]);
      budget_.step(cost_of(obj));
      Value parts[3];
      for (int k = 0; k < 3; ++k)
        if (e.args[static_cast<size_t>(k) + 1]) parts[k] = eval(*e.args[static_cast<size_t>(k) + 1]);
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::Call: return eval_call(e);
    case Expr::Kind::Filter: {
      const Value input = eval(*e.args[0]);
      const Args args = eval_args(e, 1);
      line_ = e.line;
      budget_.step(cost_of(input) + cost_of(args));
      return apply_filter(env_, e.name, input, args);
    }
    case Expr::Kind::Test: {
      const Value subject = eval(*e.args[0]);
      const Args args = eval_args(e, 1);
      line_ = e.line;
      budget_.step(cost_of(subject) + cost_of(args));
      return Value::boolean(apply_test(env_, e.name, subject, args) != e.negated);
    }
    case Expr::Kind::Unary: {
      const Value v = eval(*e.args[0]);
      if (e.name == "not") return Value::boolean(!truthy(v));
      if (v.kind == Kind::Int) return Value::integer(e.name == "-" ? (v.i == std::numeric_limits<int64_t>::min() ? v.i : -v.i) : v.i);
      if (v.kind == Kind::Float) return Value::number(e.name == "-" ? -v.f : v.f);
      if (v.kind == Kind::Bool) return Value::integer(e.name == "-" ? -int64_t{v.b} : int64_t{v.b});
      fail("cannot apply unary '" + e.name + "' to " + describe_operand(*e.args[0], v));
    }
    case Expr::Kind::Binary: return eval_binary(e);
    case Expr::Kind::And: {
      const Value l = eval(*e.args[0]);
      return truthy(l) ? eval(*e.args[1]) : l;
    }
    case Expr::Kind::Or: {
      const Value l = eval(*e.args[0]);
      return truthy(l) ? l : eval(*e.args[1]);
    }
    case Expr::Kind::Cond:
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value();
  }
  return Value();
}

Value Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::Attr) {
    const Value self = eval(*callee.args[0]);
    const Args args = eval_args(e, 1);
    line_ = e.line;
    budget_.step(cost_of(self) + cost_of(args));
    const Value member = get_attr(self, callee.name);
    if (member.kind == Kind::Callable) return member.fn->macro ? call_macro(*member.fn, args) : call_function(env_, member.fn->name, args);
    Value out;
    if (call_method(env_, self, callee.name, args, out)) return out;
    fail(std::string(kind_name(self.kind)) + " has no method '" + callee.name + "'");
  }
  const Value fn = eval(callee);
  const Args args = eval_args(e, 1);
  line_ = e.line;
  budget_.step(cost_of(args));
  if (fn.kind != Kind::Callable) {
    if (callee.kind == Expr::Kind::Name) fail("'" + callee.name + "' is " + (fn.kind == Kind::Undefined ? "undefined" : "not a function"));
    fail(std::string("cannot call a ") + kind_name(fn.kind));
  }
  return fn.fn->macro ? call_macro(*fn.fn, args) : call_function(env_, fn.fn->name, args);
}

Value Interpreter::call_macro(const Callable& fn, const Args& args) {
  const Stmt& m = *fn.macro;
  if (calls_ >= budget_.limits().max_calls)
    fail("macro calls nest deeper than " + std::to_string(budget_.limits().max_calls));
  ++calls_;
  Frame frame;
  frame.opaque = true;
  frames_.push_back(std::move(frame));
  for (size_t k = 0; k < m.targets.size(); ++k) {
    const Value* given = args.get(k, m.targets[k]);
    Value v;
    if (given) v = *given;
    else if (m.defaults[k]) v = eval(*m.defaults[k]);
    frames_.back().vars[m.targets[k]] = v;
  }
  const std::string text = capture(m.body);
  frames_.pop_back();
  --calls_;
  return heap_.str(text);
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  const Value l = eval(*e.args[0]);
  const Value r = eval(*e.args[1]);
  line_ = e.line;
  budget_.step(cost_of(l) + cost_of(r));
  if (op == "==") return Value::boolean(equal(l, r, budget_));
  if (op == "!=") return Value::boolean(!equal(l, r, budget_));
  if (op == "in") return Value::boolean(contains(r, l));
  if (op == "not in") return Value::boolean(!contains(r, l));
  if (op == "~") {
    std::string s = to_string(l, budget_);
    s += to_string(r, budget_);
    if (s.size() > budget_.limits().max_output) fail("string grows past the output limit");
    return heap_.str(std::move(s));
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    int c = 0;
    if (l.is_number() && r.is_number()) {
      const double a = l.as_double(), b = r.as_double();
      c = a < b ? -1 : a > b ? 1 : 0;
    } else if (l.kind == Kind::String && r.kind == Kind::String) {
      c = l.str().compare(r.str());
    } else {
      fail("cannot compare " + describe_operand(*e.args[0], l) + " with " + describe_operand(*e.args[1], r));
    }
    if (op == "<") return Value::boolean(c < 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">") return Value::boolean(c > 0);
    return Value::boolean(c >= 0);
  }
  return arithmetic(op, l, r, e);
}

Value Interpreter::arithmetic(const std::string& op, const Value& l, const Value& r, const Expr& e) {
  const size_t max = budget_.limits().max_output;
  if (op == "+" && l.kind == Kind::String && r.kind == Kind::String) {
    if (l.str().size() + r.str().size() > max) fail("string grows past the output limit");
    std::string s(l.str());
    s += r.str();
    return heap_.str(std::move(s));
  }
  if (op == "+" && l.kind == Kind::List && r.kind == Kind::List) {
    List* out = heap_.list();
    for (const Value& v : l.list->items) heap_.push(out, v);
    for (const Value& v : r.list->items) heap_.push(out, v);
    return Value::of(out);
  }
  if (op == "*" && (l.kind == Kind::String || l.kind == Kind::List) && r.kind == Kind::Int) {
    const int64_t n = std::max<int64_t>(r.i, 0);
    if (l.kind == Kind::String) {
      if (n > 0 && l.str().size() > max / static_cast<size_t>(n)) fail("string grows past the output limit");
      std::string s;
      for (int64_t k = 0; k < n; ++k) s += l.str();
      return heap_.str(std::move(s));
    }
    if (n > 0 && l.list->items.size() > (max / sizeof(Value)) / static_cast<size_t>(n)) fail("list grows too large");
    List* out = heap_.list();
    for (int64_t k = 0; k < n; ++k)
      for (const Value& v : l.list->items) heap_.push(out, v);
    return Value::of(out);
  }
  if (!l.is_number() || !r.is_number())
    fail("cannot apply '" + op + "' to " + describe_operand(*e.args[0], l) + " and " + describe_operand(*e.args[1], r));
  const bool ints = l.kind != Kind::Float && r.kind != Kind::Float;
  const int64_t a = l.kind == Kind::Bool ? l.b : l.i, b = r.kind == Kind::Bool ? r.b : r.i;
  const double x = l.as_double(), y = r.as_double();
  int64_t out = 0;
  if (op == "+") {
    if (!ints) return Value::number(x + y);
    if (__builtin_add_overflow(a, b, &out)) fail("integer overflow in '+'");
    return Value::integer(out);
  }
  if (op == "-") {
    if (!ints) return Value::number(x - y);
    if (__builtin_sub_overflow(a, b, &out)) fail("integer overflow in '-'");
    return Value::integer(out);
  }
  if (op == "*") {
    if (!ints) return Value::number(x * y);
    if (__builtin_mul_overflow(a, b, &out)) fail("integer overflow in '*'");
    return Value::integer(out);
  }
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail(op == "%" ? "modulo by zero" : "division by zero");
    if (ints) {
      if (a == std::numeric_limits<int64_t>::min() && b == -1) fail("integer overflow in '" + op + "'");
      return Value::integer(op == "//" ? floor_div(a, b) : floor_mod(a, b));
    }
    if (op == "//") return Value::number(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b >= 0) {
      int64_t result = 1, base = a, exp = b;
      while (exp > 0) {
        if ((exp & 1) && __builtin_mul_overflow(result, base, &result)) fail("integer overflow in '**'");
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow in '**'");
      }
      return Value::integer(result);
    }
    return Value::number(std::pow(x, y));
  }
  fail("unknown operator '" + op + "'");
}

Value Interpreter::subscript(const Value& obj, const Value& key) {
  if (obj.kind == Kind::Dict) {
    if (key.kind == Kind::String) return get_attr(obj, key.str());
    return get_attr(obj, to_string(key, budget_));
  }
  if (key.kind != Kind::Int && key.kind != Kind::Bool) return Value();
  int64_t k = key.kind == Kind::Bool ? key.b : key.i;
  if (obj.kind == Kind::List) {
    const auto n = static_cast<int64_t>(obj.list->items.size());
    if (k < 0) k += n;
    if (k < 0 || k >= n) return Value();
    return obj.list->items[static_cast<size_t>(k)];
  }
  if (obj.kind == Kind::String) {
    const std::vector<size_t> at = code_point_offsets(obj.str());
    const auto n = static_cast<int64_t>(at.size()) - 1;
    if (k < 0) k += n;
    if (k < 0 || k >= n) return Value();
    const auto i = static_cast<size_t>(k);
    return heap_.str(obj.str().substr(at[i], at[i + 1] - at[i]));
  }
  return Value();
}

Value Interpreter::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.kind == Kind::List) {
    List* out = heap_.list();
    for (int64_t k : slice_indices(static_cast<int64_t>(obj.list->items.size()), start, stop, step))
      heap_.push(out, obj.list->items[static_cast<size_t>(k)]);
    return Value::of(out);
  }
  if (obj.kind == Kind::String) {
    const std::vector<size_t> at = code_point_offsets(obj.str());
    std::string s;
    for (int64_t k : slice_indices(static_cast<int64_t>(at.size()) - 1, start, stop, step)) {
      const auto i = static_cast<size_t>(k);
      s += obj.str().substr(at[i], at[i + 1] - at[i]);
    }
    return heap_.str(std::move(s));
  }
  if (obj.kind == Kind::Undefined || obj.kind == Kind::None) return Value();
  fail(std::string("cannot slice a ") + kind_name(obj.kind));
}

bool Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::String:
      if (item.kind != Kind::String) fail(std::string("'in <string>' needs a string on the left, not ") + kind_name(item.kind));
      return container.str().find(item.str()) != std::string_view::npos;
    case Kind::List:
      for (const Value& v : container.list->items)
        if (equal(v, item, budget_)) return true;
      return false;
    case Kind::Dict:
      return item.kind == Kind::String && container.dict->find(item.str()) != nullptr;
    case Kind::Undefined: case Kind::None:
      return false;
    default:
      fail(std::string("cannot look inside a ") + kind_name(container.kind) + " with 'in'");
  }
}

}  // namespace orchard::serve::jinja
