// Filters (`x | name(args)`) and tests (`x is name(args)`).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "serve/jinja/builtins.h"
#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {
namespace {

std::string text_of(Env& env, const Value& v) { return to_string(v, env.heap.budget()); }

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.str().compare(b.str());
  fail(std::string("cannot order a ") + kind_name(a.kind) + " against a " + kind_name(b.kind));
}

// The arguments after the first `skip` positional ones, for select('test', arg) and friends.
Args rest(const Args& a, size_t skip) {
  Args out;
  for (size_t k = skip; k < a.positional.size(); ++k) out.positional.push_back(a.positional[k]);
  return out;
}

Value list_of(Env& env, const std::vector<Value>& items) {
  List* l = env.heap.list();
  for (const Value& v : items) env.heap.push(l, v);
  return Value::of(l);
}

Value select(Env& env, std::string_view name, const Value& input, const Args& a) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_if = name == "select" || name == "selectattr";
  const Value* attr = by_attr ? a.get(0, "attribute") : nullptr;
  if (by_attr && (!attr || attr->kind != Kind::String)) fail(std::string(name) + " needs an attribute name");
  const size_t test_at = by_attr ? 1 : 0;
  const Value* test = test_at < a.positional.size() ? &a.positional[test_at] : nullptr;
  if (test && test->kind != Kind::String) fail(std::string(name) + " needs a test name");
  const Args test_args = rest(a, test_at + 1);
  std::vector<Value> kept;
  for (const Value& item : iterate(env.heap, input)) {
    env.heap.budget().step();
    const Value subject = by_attr ? get_attr(item, attr->str()) : item;
    const bool pass = test ? apply_test(env, test->str(), subject, test_args) : truthy(subject);
    if (pass == keep_if) kept.push_back(item);
  }
  return list_of(env, kept);
}

Value map(Env& env, const Value& input, const Args& a) {
  std::vector<Value> out;
  const Value* attr = nullptr;
  for (const auto& [n, v] : a.named)
    if (n == "attribute") attr = &v;
  if (attr) {
    if (attr->kind != Kind::String) fail("map(attribute=…) needs a string");
    const Value* fallback = nullptr;
    for (const auto& [n, v] : a.named)
      if (n == "default") fallback = &v;
    for (const Value& item : iterate(env.heap, input)) {
      Value v = get_attr(item, attr->str());
      if (v.kind == Kind::Undefined && fallback) v = *fallback;
      out.push_back(v);
    }
    return list_of(env, out);
  }
  if (a.positional.empty() || a.positional[0].kind != Kind::String) fail("map needs a filter name or attribute=");
  const Args filter_args = rest(a, 1);
  for (const Value& item : iterate(env.heap, input)) out.push_back(apply_filter(env, a.positional[0].str(), item, filter_args));
  return list_of(env, out);
}

Value indent(Env& env, const Value& input, const Args& a) {
  std::string pad = "    ";
  if (const Value* w = a.get(0, "width")) {
    if (w->kind == Kind::String) pad = std::string(w->str());
    else if (w->kind == Kind::Int && w->i >= 0 && w->i <= 256) pad = std::string(static_cast<size_t>(w->i), ' ');
    else fail("indent width must be a string or a small integer");
  }
  const Value* first = a.get(1, "first");
  const Value* blank = a.get(2, "blank");
  const std::string s = text_of(env, input);
  std::string out;
  size_t p = 0;
  bool first_line = true;
  while (p <= s.size()) {
    size_t e = s.find('\n', p);
    const bool last = e == std::string::npos;
    if (last) e = s.size();
    const std::string_view line(s.data() + p, e - p);
    const bool pad_it = (first_line ? (first && truthy(*first)) : true) && (!line.empty() || (blank && truthy(*blank)));
    if (pad_it) out += pad;
    out.append(line);
    if (out.size() > env.heap.budget().limits().max_output) fail("indent result grows past the output limit");
    if (last) break;
    out += '\n';
    p = e + 1;
    first_line = false;
  }
  return env.heap.str(std::move(out));
}

Value to_number(const Value& input, const Args& a, bool integer) {
  const Value* fallback = a.get(0, "default");
  const Value dflt = fallback ? *fallback : integer ? Value::integer(0) : Value::number(0);
  if (input.kind == Kind::Int || input.kind == Kind::Bool)
    return integer ? Value::integer(input.kind == Kind::Bool ? input.b : input.i) : Value::number(input.as_double());
  if (input.kind == Kind::Float) {
    if (!integer) return input;
    if (!std::isfinite(input.f) || std::fabs(input.f) > 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(input.f));
  }
  if (input.kind != Kind::String) return dflt;
  std::string s(input.str());
  s.erase(0, s.find_first_not_of(" \t\n\r"));
  s.erase(s.find_last_not_of(" \t\n\r") + 1);
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return dflt;
  if (!integer) return Value::number(d);
  if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return dflt;
  return Value::integer(static_cast<int64_t>(d));
}

Value html_escape(Env& env, const Value& input) {
  std::string out;
  for (char c : text_of(env, input)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return env.heap.str(std::move(out));
}

Value extreme(Env& env, const Value& input, const Args& a, bool want_max) {
  const Value* attr = a.get(1, "attribute");
  Value best;
  for (const Value& item : iterate(env.heap, input)) {
    const Value key = attr && attr->kind == Kind::String ? get_attr(item, attr->str()) : item;
    const Value best_key = attr && attr->kind == Kind::String ? get_attr(best, attr->str()) : best;
    if (best.kind == Kind::Undefined || (compare(key, best_key) > 0) == want_max) best = item;
  }
  return best;
}

}  // namespace

Value apply_filter(Env& env, std::string_view name, const Value& input, const Args& a) {
  Heap& heap = env.heap;
  Value out;
  if (name == "trim" || name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    const Value s = input.kind == Kind::String ? input : heap.str(text_of(env, input));
    Args method_args;
    if (name == "trim") {
      if (const Value* chars = a.get(0, "chars")) method_args.positional.push_back(*chars);
    }
    call_method(env, s, name == "trim" ? "strip" : name, method_args, out);
    return out;
  }
  if (name == "replace") {
    call_method(env, input.kind == Kind::String ? input : heap.str(text_of(env, input)), name, a, out);
    return out;
  }
  if (name == "length" || name == "count") {
    switch (input.kind) {
      case Kind::String: return Value::integer(static_cast<int64_t>(code_point_offsets(input.str()).size() - 1));
      case Kind::List: return Value::integer(static_cast<int64_t>(input.list->items.size()));
      case Kind::Dict: return Value::integer(static_cast<int64_t>(input.dict->items.size()));
      case Kind::Undefined: return Value::integer(0);
      default: fail(std::string("a ") + kind_name(input.kind) + " has no length");
    }
  }
  if (name == "tojson") {
    const Value* ind = a.get(0, "indent");
    int width = -1;
    if (ind && ind->kind == Kind::Int) width = static_cast<int>(std::clamp<int64_t>(ind->i, 0, 64));
    return heap.str(to_json(input, heap.budget(), width));
  }
  if (name == "default" || name == "d") {
    const Value* fallback = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    const bool use = input.kind == Kind::Undefined || (boolean && truthy(*boolean) && !truthy(input));
    if (!use) return input;
    return fallback ? *fallback : heap.str("");
  }
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(heap, input);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    const std::string glue = sep ? text_of(env, *sep) : "";
    std::string s;
    bool first = true;
    for (const Value& item : iterate(heap, input)) {
      if (!first) s += glue;
      first = false;
      s += text_of(env, attr && attr->kind == Kind::String ? get_attr(item, attr->str()) : item);
      if (s.size() > heap.budget().limits().max_output) fail("join result grows past the output limit");
    }
    return heap.str(std::move(s));
  }
  if (name == "string") return input.kind == Kind::String ? input : heap.str(text_of(env, input));
  if (name == "safe") return input;
  if (name == "escape" || name == "e") return html_escape(env, input);
  if (name == "items" || name == "dictsort") {
    if (input.kind == Kind::Undefined || input.kind == Kind::None) return Value::of(heap.list());
    if (input.kind != Kind::Dict) fail(std::string(name) + " needs a dict, not a " + kind_name(input.kind));
    call_method(env, input, "items", Args{}, out);
    if (name == "dictsort")
      std::stable_sort(out.list->items.begin(), out.list->items.end(), [](const Value& x, const Value& y) {
        return x.list->items[0].str() < y.list->items[0].str();
      });
    return out;
  }
  if (name == "list") return list_of(env, iterate(heap, input));
  if (name == "reverse") {
    std::vector<Value> items = iterate(heap, input);
    std::reverse(items.begin(), items.end());
    if (input.kind != Kind::String) return list_of(env, items);
    std::string s;
    for (const Value& v : items) s += v.str();
    return heap.str(std::move(s));
  }
  if (name == "unique") {
    std::vector<Value> kept;
    for (const Value& item : iterate(heap, input)) {
      bool seen = false;
      for (const Value& k : kept) seen = seen || equal(k, item, heap.budget());
      heap.budget().step(kept.size());
      if (!seen) kept.push_back(item);
    }
    return list_of(env, kept);
  }
  if (name == "sort") {
    std::vector<Value> items = iterate(heap, input);
    const Value* reverse = a.get(0, "reverse");
    const Value* attr = a.get(2, "attribute");
    const bool desc = reverse && truthy(*reverse);
    heap.budget().step(items.size() * 20);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = attr && attr->kind == Kind::String ? get_attr(x, attr->str()) : x;
      const Value ky = attr && attr->kind == Kind::String ? get_attr(y, attr->str()) : y;
      const int c = compare(kx, ky);
      return desc ? c > 0 : c < 0;
    });
    return list_of(env, items);
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") return select(env, name, input, a);
  if (name == "map") return map(env, input, a);
  if (name == "indent") return indent(env, input, a);
  if (name == "int") return to_number(input, a, true);
  if (name == "float") return to_number(input, a, false);
  if (name == "abs") {
    if (input.kind == Kind::Int) return Value::integer(input.i < 0 && input.i != INT64_MIN ? -input.i : input.i);
    if (input.kind == Kind::Float) return Value::number(std::fabs(input.f));
    fail(std::string("abs needs a number, not a ") + kind_name(input.kind));
  }
  if (name == "round") {
    if (!input.is_number()) fail(std::string("round needs a number, not a ") + kind_name(input.kind));
    const Value* precision = a.get(0, "precision");
    const int64_t digits = precision && precision->kind == Kind::Int ? std::clamp<int64_t>(precision->i, 0, 15) : 0;
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value::number(std::round(input.as_double() * scale) / scale);
  }
  if (name == "min" || name == "max") return extreme(env, input, a, name == "max");
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    Value total = Value::integer(0);
    if (const Value* start = a.get(1, "start")) total = *start;
    for (const Value& item : iterate(heap, input)) {
      const Value v = attr && attr->kind == Kind::String ? get_attr(item, attr->str()) : item;
      if (!v.is_number() || !total.is_number()) fail("sum needs numbers");
      int64_t r = 0;
      if (v.kind == Kind::Float || total.kind == Kind::Float || __builtin_add_overflow(total.i, v.kind == Kind::Bool ? v.b : v.i, &r))
        total = Value::number(total.as_double() + v.as_double());
      else
        total = Value::integer(r);
    }
    return total;
  }
  if (name == "attr") {
    const Value* key = a.get(0, "name");
    if (!key || key->kind != Kind::String) fail("attr needs a name");
    return get_attr(input, key->str());
  }
  fail("unknown filter '" + std::string(name) + "'");
}

bool apply_test(Env& env, std::string_view name, const Value& v, const Args& a) {
  const Value* arg = a.get(0, "value");
  auto need_arg = [&]() -> const Value& {
    if (!arg) fail("test '" + std::string(name) + "' needs an argument");
    return *arg;
  };
  if (name == "defined") return v.kind != Kind::Undefined;
  if (name == "undefined") return v.kind == Kind::Undefined;
  if (name == "none") return v.kind == Kind::None;
  if (name == "string") return v.kind == Kind::String;
  if (name == "number") return v.kind == Kind::Int || v.kind == Kind::Float;
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "float") return v.kind == Kind::Float;
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "true") return v.kind == Kind::Bool && v.b;
  if (name == "false") return v.kind == Kind::Bool && !v.b;
  if (name == "mapping") return v.kind == Kind::Dict;
  if (name == "sequence") return v.kind == Kind::List || v.kind == Kind::String || v.kind == Kind::Dict;
  if (name == "iterable") return v.kind == Kind::List || v.kind == Kind::String || v.kind == Kind::Dict;
  if (name == "callable") return v.kind == Kind::Callable;
  if (name == "lower" || name == "upper") {
    if (v.kind != Kind::String) return false;
    for (char c : v.str())
      if (name == "lower" ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return false;
    return true;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != Kind::Int) fail("test '" + std::string(name) + "' needs an integer");
    if (name == "odd") return v.i % 2 != 0;
    if (name == "even") return v.i % 2 == 0;
    const Value& d = need_arg();
    if (d.kind != Kind::Int || d.i == 0) fail("divisibleby needs a non-zero integer");
    return d.i == -1 || v.i % d.i == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, need_arg(), env.heap.budget());
  if (name == "ne" || name == "!=") return !equal(v, need_arg(), env.heap.budget());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, need_arg()) < 0;
  if (name == "le" || name == "<=") return compare(v, need_arg()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, need_arg()) > 0;
  if (name == "ge" || name == ">=") return compare(v, need_arg()) >= 0;
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.kind != o.kind) return false;
    if (v.kind == Kind::List) return v.list == o.list;
    if (v.kind == Kind::Dict) return v.dict == o.dict;
    return equal(v, o, env.heap.budget());
  }
  if (name == "in") {
    const Value& c = need_arg();
    if (c.kind == Kind::String) return v.kind == Kind::String && c.str().find(v.str()) != std::string_view::npos;
    if (c.kind == Kind::Dict) return v.kind == Kind::String && c.dict->find(v.str());
    for (const Value& item : iterate(env.heap, c))
      if (equal(item, v, env.heap.budget())) return true;
    return false;
  }
  fail("unknown test '" + std::string(name) + "'");
}

}  // namespace orchard::serve::jinja
