#pragma once
// What the interpreter offers templates by name: filters (`x | trim`), tests (`x is string`),
// methods on strings, lists and dicts (`s.startswith('a')`, `d.items()`), and the global
// functions (range, namespace, raise_exception, strftime_now, dict). Each follows the Python /
// Jinja behaviour chat templates were written against; upper/lower/title/capitalize and
// whitespace trimming only know ASCII.
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/jinja/value.h"

namespace orchard::serve::jinja {

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The k-th positional argument, else the one called `name`, else null.
  const Value* get(size_t k, std::string_view name) const;
};

// What builtins need from the render in progress.
struct Env {
  Heap& heap;
  const std::tm& now;
};

// Each throws Failure naming what is unknown or mistyped ("unknown filter 'foo'").
Value apply_filter(Env& env, std::string_view name, const Value& input, const Args& args);
bool apply_test(Env& env, std::string_view name, const Value& subject, const Args& args);
// False when `self` has no method `name` (the caller then reports it).
bool call_method(Env& env, const Value& self, std::string_view name, const Args& args, Value& out);
Value call_function(Env& env, std::string_view name, const Args& args);
// Names call_function answers to; the interpreter defines them as globals so that
// `strftime_now is defined` holds.
const std::vector<std::string>& function_names();

// Python indexes strings by code point: the byte offset where each one starts, plus the end.
std::vector<size_t> code_point_offsets(std::string_view s);
// Python's slice rules (negative indices count from the end, None means the natural bound).
std::vector<int64_t> slice_indices(int64_t size, const Value& start, const Value& stop, const Value& step);
// Elements of a list, keys of a dict, characters of a string; nothing for undefined.
std::vector<Value> iterate(Heap& heap, const Value& v);
// Attribute or item lookup as `x.name` does it (dict keys; undefined otherwise).
Value get_attr(const Value& obj, std::string_view name);

}  // namespace orchard::serve::jinja
