// Methods on strings, lists and dicts, the global functions, and the small helpers the
// interpreter and the filters share (Python's indexing, slicing and iteration rules).
#include <algorithm>
#include <cstring>

#include "serve/jinja/builtins.h"
#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}
std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

const std::string& need_string(const Value* v, const char* what) {
  static const std::string empty;
  if (!v || v->kind != Kind::String) fail(std::string(what) + " needs a string argument");
  return v->s ? *v->s : empty;
}

int64_t need_int(const Value* v, const char* what) {
  if (!v || (v->kind != Kind::Int && v->kind != Kind::Bool)) fail(std::string(what) + " needs an integer argument");
  return v->kind == Kind::Bool ? v->b : v->i;
}

std::string_view strip(std::string_view s, const Value* chars, bool left, bool right) {
  std::string_view set = kWhitespace;
  if (chars && chars->kind == Kind::String) set = chars->str();
  else if (chars && chars->kind != Kind::None && chars->kind != Kind::Undefined) fail("strip needs a string of characters");
  while (left && !s.empty() && set.find(s.front()) != std::string_view::npos) s.remove_prefix(1);
  while (right && !s.empty() && set.find(s.back()) != std::string_view::npos) s.remove_suffix(1);
  return s;
}

bool affix(std::string_view s, const Value* arg, bool prefix) {
  auto one = [&](std::string_view a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.substr(0, a.size()) == a : s.substr(s.size() - a.size()) == a;
  };
  if (arg && arg->kind == Kind::List) {
    for (const Value& v : arg->list->items) {
      if (v.kind != Kind::String) fail("startswith/endswith take strings");
      if (one(v.str())) return true;
    }
    return false;
  }
  return one(need_string(arg, prefix ? "startswith" : "endswith"));
}

Value split(Env& env, std::string_view s, const Value* sep_arg, const Value* max_arg) {
  int64_t max = max_arg ? need_int(max_arg, "split") : -1;
  List* out = env.heap.list();
  if (!sep_arg || sep_arg->kind == Kind::None || sep_arg->kind == Kind::Undefined) {
    // Runs of whitespace separate; leading and trailing whitespace yields nothing.
    size_t p = 0;
    while (p < s.size()) {
      p = s.find_first_not_of(kWhitespace, p);
      if (p == std::string_view::npos) break;
      if (max == 0) {
        env.heap.push(out, env.heap.str(strip(s.substr(p), nullptr, false, true)));
        break;
      }
      size_t e = s.find_first_of(kWhitespace, p);
      if (e == std::string_view::npos) e = s.size();
      env.heap.push(out, env.heap.str(s.substr(p, e - p)));
      if (max > 0) --max;
      p = e;
    }
    return Value::of(out);
  }
  const std::string& sep = need_string(sep_arg, "split");
  if (sep.empty()) fail("split: empty separator");
  size_t p = 0;
  for (;;) {
    env.heap.budget().step();
    const size_t e = max == 0 ? std::string_view::npos : s.find(sep, p);
    if (e == std::string_view::npos) {
      env.heap.push(out, env.heap.str(s.substr(p)));
      return Value::of(out);
    }
    env.heap.push(out, env.heap.str(s.substr(p, e - p)));
    if (max > 0) --max;
    p = e + sep.size();
  }
}

Value replace(Env& env, std::string_view s, const Value* from_arg, const Value* to_arg, const Value* count_arg) {
  const std::string& from = need_string(from_arg, "replace");
  const std::string& to = need_string(to_arg, "replace");
  int64_t count = count_arg && count_arg->kind != Kind::None ? need_int(count_arg, "replace") : -1;
  const size_t max = env.heap.budget().limits().max_output;
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::vector<size_t> at = code_point_offsets(s);
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count != 0) { out += to; if (count > 0) --count; }
      out.append(s.substr(at[k], at[k + 1] - at[k]));
      if (out.size() > max) fail("replace result grows past the output limit");
    }
    if (count != 0) out += to;
    return env.heap.str(std::move(out));
  }
  size_t p = 0;
  while (count != 0) {
    const size_t e = s.find(from, p);
    if (e == std::string_view::npos) break;
    out.append(s.substr(p, e - p));
    out += to;
    if (out.size() > max) fail("replace result grows past the output limit");
    p = e + from.size();
    if (count > 0) --count;
  }
  out.append(s.substr(p));
  return env.heap.str(std::move(out));
}

bool string_method(Env& env, std::string_view s, std::string_view name, const Args& a, Value& out) {
  Heap& heap = env.heap;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    out = heap.str(strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
  } else if (name == "startswith" || name == "endswith") {
    out = Value::boolean(affix(s, a.get(0, "prefix"), name == "startswith"));
  } else if (name == "split") {
    out = split(env, s, a.get(0, "sep"), a.get(1, "maxsplit"));
  } else if (name == "upper") {
    out = heap.str(ascii_upper(s));
  } else if (name == "lower") {
    out = heap.str(ascii_lower(s));
  } else if (name == "capitalize" || name == "title") {
    // capitalize: first character up, the rest down; title: the same for every word.
    std::string t = ascii_lower(s);
    bool start = true;
    for (char& c : t) {
      const bool letter = (c >= 'a' && c <= 'z');
      if (start && letter) c = static_cast<char>(c - 'a' + 'A');
      start = name == "title" ? !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) : false;
    }
    out = heap.str(std::move(t));
  } else if (name == "replace") {
    out = replace(env, s, a.get(0, "old"), a.get(1, "new"), a.get(2, "count"));
  } else if (name == "find") {
    const size_t p = s.find(need_string(a.get(0, "sub"), "find"));
    out = Value::integer(p == std::string_view::npos ? -1 : static_cast<int64_t>(code_point_offsets(s.substr(0, p)).size() - 1));
  } else if (name == "count") {
    const std::string& sub = need_string(a.get(0, "sub"), "count");
    int64_t n = 0;
    if (sub.empty()) n = static_cast<int64_t>(code_point_offsets(s).size());
    else for (size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
    out = Value::integer(n);
  } else if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (!items) fail("join needs an iterable");
    std::string t;
    bool first = true;
    for (const Value& v : iterate(heap, *items)) {
      if (!first) t += s;
      first = false;
      t += to_string(v, heap.budget());
      if (t.size() > heap.budget().limits().max_output) fail("join result grows past the output limit");
    }
    out = heap.str(std::move(t));
  } else if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
             name == "islower" || name == "isupper") {
    bool all = !s.empty();
    for (char c : s) {
      const bool digit = c >= '0' && c <= '9', lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
      if (name == "isdigit") all = all && digit;
      else if (name == "isalpha") all = all && (lower || upper);
      else if (name == "isalnum") all = all && (lower || upper || digit);
      else if (name == "isspace") all = all && kWhitespace.find(c) != std::string_view::npos;
      else if (name == "islower") all = all && !upper;
      else all = all && !lower;
    }
    out = Value::boolean(all);
  } else {
    return false;
  }
  return true;
}

bool list_method(Env& env, List* l, std::string_view name, const Args& a, Value& out) {
  if (name == "append") {
    const Value* v = a.get(0, "item");
    if (!v) fail("append needs an item");
    env.heap.push(l, *v);
    out = Value::none();
  } else if (name == "pop") {
    if (l->items.empty()) fail("pop from an empty list");
    auto k = static_cast<int64_t>(l->items.size()) - 1;
    if (const Value* i = a.get(0, "index")) k = need_int(i, "pop");
    if (k < 0) k += static_cast<int64_t>(l->items.size());
    if (k < 0 || k >= static_cast<int64_t>(l->items.size())) fail("pop index out of range");
    out = l->items[static_cast<size_t>(k)];
    l->items.erase(l->items.begin() + k);
  } else if (name == "index" || name == "count") {
    const Value* v = a.get(0, "item");
    if (!v) fail(std::string(name) + " needs an item");
    int64_t n = 0, first = -1;
    for (size_t k = 0; k < l->items.size(); ++k) {
      if (!equal(l->items[k], *v, env.heap.budget())) continue;
      if (first < 0) first = static_cast<int64_t>(k);
      ++n;
    }
    if (name == "index" && first < 0) fail("index: item is not in the list");
    out = Value::integer(name == "index" ? first : n);
  } else {
    return false;
  }
  return true;
}

bool dict_method(Env& env, Dict* d, std::string_view name, const Args& a, Value& out) {
  Heap& heap = env.heap;
  if (name == "items" || name == "keys" || name == "values") {
    List* l = heap.list();
    for (const auto& [key, value] : d->items) {
      if (name == "values") {
        heap.push(l, value);
        continue;
      }
      const Value k = heap.str(key);
      if (name == "keys") {
        heap.push(l, k);
        continue;
      }
      List* pair = heap.list();
      heap.push(pair, k);
      heap.push(pair, value);
      heap.push(l, Value::of(pair));
    }
    out = Value::of(l);
  } else if (name == "get") {
    const Value* key = a.get(0, "key");
    if (!key) fail("get needs a key");
    const Value* found = key->kind == Kind::String ? d->find(key->str()) : nullptr;
    const Value* fallback = a.get(1, "default");
    out = found ? *found : fallback ? *fallback : Value::none();
  } else {
    return false;
  }
  return true;
}

Value range(Env& env, const Args& a) {
  int64_t start = 0, stop = 0, step = 1;
  if (a.positional.size() == 1) {
    stop = need_int(&a.positional[0], "range");
  } else if (a.positional.size() == 2 || a.positional.size() == 3) {
    start = need_int(&a.positional[0], "range");
    stop = need_int(&a.positional[1], "range");
    if (a.positional.size() == 3) step = need_int(&a.positional[2], "range");
  } else {
    fail("range takes 1 to 3 integers");
  }
  if (step == 0) fail("range step must not be zero");
  const auto max_items = static_cast<int64_t>(env.heap.budget().limits().max_bytes / sizeof(Value));
  List* out = env.heap.list();
  for (int64_t v = start, n = 0; step > 0 ? v < stop : v > stop; ++n) {
    if (n >= max_items) fail("range is too long");
    env.heap.push(out, Value::integer(v));
    if (__builtin_add_overflow(v, step, &v)) break;
  }
  return Value::of(out);
}

}  // namespace

const Value* Args::get(size_t k, std::string_view name) const {
  if (k < positional.size()) return &positional[k];
  for (const auto& [n, v] : named)
    if (n == name) return &v;
  return nullptr;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> at;
  for (size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) at.push_back(k);
  at.push_back(s.size());
  return at;
}

std::vector<int64_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step) {
  auto given = [](const Value& v) { return v.kind != Kind::Undefined && v.kind != Kind::None; };
  auto as_int = [](const Value& v) {
    if (v.kind != Kind::Int && v.kind != Kind::Bool) fail("slice indices must be integers");
    return v.kind == Kind::Bool ? int64_t{v.b} : v.i;
  };
  const int64_t st = given(step) ? as_int(step) : 1;
  if (st == 0) fail("slice step cannot be zero");
  auto clamp = [&](int64_t i, int64_t lo, int64_t hi) {
    if (i < 0) i += n;
    return std::clamp(i, lo, hi);
  };
  std::vector<int64_t> out;
  if (st > 0) {
    const int64_t lo = given(start) ? clamp(as_int(start), 0, n) : 0;
    const int64_t hi = given(stop) ? clamp(as_int(stop), 0, n) : n;
    for (int64_t i = lo; i < hi; i += st) out.push_back(i);
  } else {
    const int64_t lo = given(start) ? clamp(as_int(start), -1, n - 1) : n - 1;
    const int64_t hi = given(stop) ? clamp(as_int(stop), -1, n - 1) : -1;
    for (int64_t i = lo; i > hi; i += st) out.push_back(i);
  }
  return out;
}

std::vector<Value> iterate(Heap& heap, const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Kind::List: return v.list->items;
    case Kind::Dict:
      for (const auto& kv : v.dict->items) out.push_back(heap.str(kv.first));
      return out;
    case Kind::String: {
      const std::vector<size_t> at = code_point_offsets(v.str());
      for (size_t k = 0; k + 1 < at.size(); ++k) out.push_back(heap.str(v.str().substr(at[k], at[k + 1] - at[k])));
      return out;
    }
    case Kind::Undefined: case Kind::None: return out;
    default: fail(std::string("cannot loop over a ") + kind_name(v.kind));
  }
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.kind != Kind::Dict) return Value();
  const Value* v = obj.dict->find(name);
  return v ? *v : Value();
}

bool call_method(Env& env, const Value& self, std::string_view name, const Args& args, Value& out) {
  switch (self.kind) {
    case Kind::String: return string_method(env, self.str(), name, args, out);
    case Kind::List: return list_method(env, self.list, name, args, out);
    case Kind::Dict: return dict_method(env, self.dict, name, args, out);
    default: return false;
  }
}

const std::vector<std::string>& function_names() {
  static const std::vector<std::string> names = {"range", "namespace", "dict", "raise_exception", "strftime_now"};
  return names;
}

Value call_function(Env& env, std::string_view name, const Args& a) {
  Heap& heap = env.heap;
  if (name == "range") return range(env, a);
  if (name == "namespace" || name == "dict") {
    Dict* d = heap.dict();
    d->is_namespace = name == "namespace";
    if (!a.positional.empty()) {  // namespace(other_dict, key=value…) copies the dict first
      if (a.positional[0].kind != Kind::Dict) fail(std::string(name) + " takes a dict and keyword arguments");
      for (const auto& [k, v] : a.positional[0].dict->items) heap.set(d, k, v);
    }
    for (const auto& [k, v] : a.named) heap.set(d, k, v);
    return Value::of(d);
  }
  if (name == "raise_exception") {
    const Value* msg = a.get(0, "message");
    throw Failure{msg ? to_string(*msg, heap.budget()) : std::string("raise_exception() called"), 0, true};
  }
  if (name == "strftime_now") {
    const std::string& format = need_string(a.get(0, "format"), "strftime_now");
    if (format.size() > 200) fail("strftime_now format is too long");
    char buf[1024];
    const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &env.now);
    return heap.str(std::string(buf, n));
  }
  fail("unknown function '" + std::string(name) + "'");
}

}  // namespace orchard::serve::jinja
