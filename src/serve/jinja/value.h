#pragma once
// Values of the Jinja subset, and the heap they live on while one template renders.
//
// Every list, dict and string made during a render belongs to a Heap that is dropped when the
// render ends; a Value only points into it. Templates can build cycles (a namespace attribute
// holding the namespace, a list appended to itself), so reference counting would leak; with
// one owner per render nothing outlives it, and the walks that follow references (printing,
// tojson, equality) are bounded by Budget instead.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {

struct List;
struct Dict;
struct Callable;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  const std::string* s = nullptr;  // String: owned by the Heap (or by the parsed template)
  List* list = nullptr;
  Dict* dict = nullptr;
  const Callable* fn = nullptr;

  static Value none() { return with_kind(Kind::None); }
  static Value boolean(bool v) { Value x = with_kind(Kind::Bool); x.b = v; return x; }
  static Value integer(int64_t v) { Value x = with_kind(Kind::Int); x.i = v; return x; }
  static Value number(double v) { Value x = with_kind(Kind::Float); x.f = v; return x; }
  static Value string(const std::string* v) { Value x = with_kind(Kind::String); x.s = v; return x; }
  static Value of(List* v) { Value x = with_kind(Kind::List); x.list = v; return x; }
  static Value of(Dict* v) { Value x = with_kind(Kind::Dict); x.dict = v; return x; }
  static Value of(const Callable* v) { Value x = with_kind(Kind::Callable); x.fn = v; return x; }

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(kind == Kind::Bool ? b : i); }
  std::string_view str() const { return s ? std::string_view(*s) : std::string_view(); }

 private:
  static Value with_kind(Kind k) { Value x; x.kind = k; return x; }
};

struct List {
  std::vector<Value> items;
};

// Insertion-ordered, string-keyed (what JSON objects and keyword arguments need). A namespace()
// is a Dict whose attributes may be assigned with `set ns.x = …`.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;
  bool is_namespace = false;

  const Value* find(std::string_view key) const;
  void set(std::string_view key, Value v);
};

struct Stmt;
struct Callable {
  std::string name;            // builtin function name, or the macro's name
  const Stmt* macro = nullptr; // null for builtins
};

// Counts work and bytes against Limits; every loop iteration, expression evaluation and
// reference followed charges a step, so no template runs unbounded.
class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  void step(size_t n = 1);
  void bytes(size_t n);

 private:
  const Limits& limits_;
  size_t steps_ = 0;
  size_t bytes_ = 0;
};

class Heap {
 public:
  explicit Heap(Budget& budget) : budget_(budget) {}
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  Budget& budget() { return budget_; }
  Value str(std::string s);
  Value str(std::string_view s) { return str(std::string(s)); }
  Value str(const char* s) { return str(std::string(s)); }
  List* list();
  Dict* dict();
  const Callable* callable(std::string name, const Stmt* macro);
  // Adds to a list, charging its memory.
  void push(List* l, Value v);
  void set(Dict* d, std::string_view key, Value v);

 private:
  Budget& budget_;
  std::deque<std::string> strings_;
  std::deque<List> lists_;
  std::deque<Dict> dicts_;
  std::deque<Callable> callables_;
};

// Python-like semantics, which is what chat templates were written against.
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b, Budget& budget);
const char* kind_name(Kind k);
// str(): what `{{ v }}` prints (True, None, ['a', 1], {'k': 'v'}; undefined prints nothing).
std::string to_string(const Value& v, Budget& budget);
// json.dumps(v, ensure_ascii=False) with Python's default separators, or with `indent`
// spaces per level when indent >= 0.
std::string to_json(const Value& v, Budget& budget, int indent = -1);
// repr() of a float the way Python prints it (shortest round-trip, always with a '.').
std::string format_float(double d);

}  // namespace orchard::serve::jinja
