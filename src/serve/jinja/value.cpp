#include "serve/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace orchard::serve::jinja {

const Value* Dict::find(std::string_view key) const {
  auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &items[it->second].second;
}

void Dict::set(std::string_view key, Value v) {
  auto [it, inserted] = index.emplace(std::string(key), items.size());
  if (inserted) items.emplace_back(std::string(key), v);
  else items[it->second].second = v;
}

void Budget::step(size_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    fail("template does too much work (more than " + std::to_string(limits_.max_steps) + " steps)");
}

void Budget::bytes(size_t n) {
  bytes_ += n;
  if (bytes_ > limits_.max_bytes)
    fail("template makes too much data (more than " + std::to_string(limits_.max_bytes) + " bytes)");
}

Value Heap::str(std::string s) {
  budget_.bytes(s.size() + sizeof(std::string));
  strings_.push_back(std::move(s));
  return Value::string(&strings_.back());
}

List* Heap::list() {
  budget_.bytes(sizeof(List));
  return &lists_.emplace_back();
}

Dict* Heap::dict() {
  budget_.bytes(sizeof(Dict));
  return &dicts_.emplace_back();
}

const Callable* Heap::callable(std::string name, const Stmt* macro) {
  budget_.bytes(sizeof(Callable) + name.size());
  return &callables_.emplace_back(Callable{std::move(name), macro});
}

void Heap::push(List* l, Value v) {
  budget_.bytes(sizeof(Value));
  l->items.push_back(v);
}

void Heap::set(Dict* d, std::string_view key, Value v) {
  if (!d->find(key)) budget_.bytes(sizeof(Value) + 2 * key.size() + 64);
  d->set(key, v);
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return !v.list->items.empty();
    case Kind::Dict: return v.dict->is_namespace || !v.dict->items.empty();
    case Kind::Callable: return true;
  }
  return false;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Callable: return "function";
  }
  return "?";
}

namespace {

// Cyclic values are possible (see value.h), so every walk is depth-limited as well as charged.
void enter(Budget& budget, int depth) {
  budget.step();
  if (depth > budget.limits().max_depth) fail("value nests too deeply to print or compare");
}

bool equal_at(const Value& a, const Value& b, Budget& budget, int depth) {
  enter(budget, depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::Float && b.kind != Kind::Float)
      return (a.kind == Kind::Bool ? a.b : a.i) == (b.kind == Kind::Bool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::Callable: return a.fn == b.fn;
    case Kind::List: {
      if (a.list == b.list) return true;
      if (a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equal_at(a.list->items[k], b.list->items[k], budget, depth + 1)) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, value] : a.dict->items) {
        const Value* other = b.dict->find(key);
        if (!other || !equal_at(value, *other, budget, depth + 1)) return false;
      }
      return true;
    }
    default: return false;
  }
}

// Python's repr() of a str: single quotes unless the text has one and no double quote.
void repr_string(std::string_view s, std::string& out) {
  const char quote = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) ? '"' : '\'';
  out += quote;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') { out += '\\'; out += c; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else out += c;
  }
  out += quote;
}

void print_at(const Value& v, Budget& budget, int depth, bool nested, std::string& out) {
  enter(budget, depth);
  switch (v.kind) {
    case Kind::Undefined: return;
    case Kind::None: out += "None"; return;
    case Kind::Bool: out += v.b ? "True" : "False"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float: out += format_float(v.f); return;
    case Kind::String:
      if (nested) repr_string(v.str(), out);
      else out += v.str();
      return;
    case Kind::Callable: out += "<function " + v.fn->name + ">"; return;
    case Kind::List: {
      out += '[';
      for (size_t k = 0; k < v.list->items.size(); ++k) {
        if (k) out += ", ";
        print_at(v.list->items[k], budget, depth + 1, true, out);
        if (out.size() > budget.limits().max_output) fail("printed value is too large");
      }
      out += ']';
      return;
    }
    case Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        repr_string(key, out);
        out += ": ";
        print_at(value, budget, depth + 1, true, out);
        if (out.size() > budget.limits().max_output) fail("printed value is too large");
      }
      out += '}';
      return;
    }
  }
}

void json_string(std::string_view s, std::string& out) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void json_at(const Value& v, Budget& budget, int indent, int depth, std::string& out) {
  enter(budget, depth);
  if (out.size() > budget.limits().max_output) fail("tojson result is too large");
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  };
  switch (v.kind) {
    case Kind::Undefined: case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += format_float(v.f);
      return;
    case Kind::String: json_string(v.str(), out); return;
    case Kind::Callable: fail("tojson cannot serialize a function");
    case Kind::List: {
      if (v.list->items.empty()) { out += "[]"; return; }
      out += '[';
      for (size_t k = 0; k < v.list->items.size(); ++k) {
        if (k) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        json_at(v.list->items[k], budget, indent, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) { out += "{}"; return; }
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.dict->items) {
        if (!first) out += indent < 0 ? ", " : ",";
        first = false;
        newline(depth + 1);
        json_string(key, out);
        out += ": ";
        json_at(value, budget, indent, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

bool equal(const Value& a, const Value& b, Budget& budget) { return equal_at(a, b, budget, 0); }

std::string to_string(const Value& v, Budget& budget) {
  if (v.kind == Kind::String) return std::string(v.str());
  std::string out;
  print_at(v, budget, 0, false, out);
  return out;
}

std::string to_json(const Value& v, Budget& budget, int indent) {
  std::string out;
  json_at(v, budget, indent, 0, out);
  return out;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest digits that round-trip, then laid out the way Python's repr() does: positional
  // for exponents in [-4, 16), scientific with a two-digit exponent otherwise.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  if (ec != std::errc()) return "nan";
  std::string sci(buf, end);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') { sign = "-"; mant.erase(0, 1); }
  std::string digits;
  for (char c : mant) if (c != '.') digits += c;
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + out + ebuf;
}

}  // namespace orchard::serve::jinja
