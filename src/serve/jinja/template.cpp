#include "serve/jinja/template.h"

#include "serve/jinja/ast.h"
#include "serve/jinja/interpreter.h"
#include "serve/jinja/lexer.h"
#include "serve/jinja/parser.h"

namespace orchard::serve::jinja {

struct Template::Program {
  Body body;
};

namespace {

std::string located(const Failure& f) {
  return "chat template line " + std::to_string(f.line) + ": " + f.message;
}

Value from_json(Heap& heap, const nlohmann::ordered_json& j, int depth) {
  heap.budget().step();
  if (depth > heap.budget().limits().max_depth) fail("input nests too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string: return heap.str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      List* l = heap.list();
      for (const auto& item : j) heap.push(l, from_json(heap, item, depth + 1));
      return Value::of(l);
    }
    case nlohmann::json::value_t::object: {
      Dict* d = heap.dict();
      for (const auto& [key, item] : j.items()) heap.set(d, key, from_json(heap, item, depth + 1));
      return Value::of(d);
    }
    default: return Value();
  }
}

}  // namespace

Template Template::parse(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_source)
    throw orchard::Error("chat template is " + std::to_string(source.size()) + " bytes, more than the " +
                         std::to_string(limits.max_source) + " allowed");
  Template t;
  t.limits_ = limits;
  try {
    auto program = std::make_shared<Program>();
    program->body = jinja::parse(tokenize(source), limits.max_depth);
    t.program_ = std::move(program);
  } catch (const Failure& f) {
    throw orchard::Error(located(f));
  }
  return t;
}

std::string Template::render(const nlohmann::ordered_json& globals, const std::tm& now) const {
  if (!program_) throw orchard::Error("chat template: rendering a template that was never parsed");
  Budget budget(limits_);
  Heap heap(budget);
  Interpreter interpreter(heap, now);
  try {
    if (!globals.is_object()) fail("template variables must be a JSON object");
    for (const auto& [name, value] : globals.items()) interpreter.define_global(name, from_json(heap, value, 0));
    return interpreter.run(program_->body);
  } catch (Failure& f) {
    if (f.line == 0) f.line = interpreter.line();
    if (f.raised) throw RaisedError("chat template line " + std::to_string(f.line) + " raised an error: " + f.message);
    throw orchard::Error(located(f));
  }
}

}  // namespace orchard::serve::jinja
