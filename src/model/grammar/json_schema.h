#pragma once
// JSON Schema to Grammar: the JSON texts a schema accepts, as rules a GrammarMatcher can hold
// sampling to (what llama.cpp's json-schema-to-grammar, XGrammar and Outlines do).
//
// Supported: type (one or a list), enum, const, properties / required / additionalProperties
// (false, true or a schema; absent means no others when properties are given, any when not),
// items / prefixItems / minItems / maxItems, minLength / maxLength, minimum / maximum /
// exclusiveMinimum / exclusiveMaximum (whole numbers in range, fractions where they fit),
// anyOf / oneOf (any branch), allOf of object schemas (merged), nullable, $ref into the
// document ("#", "#/$defs/…", "#/definitions/…"; recursion allowed), and the boolean schemas.
// Annotations (title, description, default, examples, format, $schema, $id, $comment, strict…)
// are read past. Keywords that constrain in ways the grammar does not (pattern, multipleOf,
// uniqueItems, not, if/then/else, …) are refused, as is anything that would make the grammar
// too large: a schema that cannot be kept is an error, not a silently looser output.
//
// Properties come out in the order the object gives them, required ones always, optional ones
// or not; no key twice.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/grammar/grammar.h"
#include "tensor/error.h"

namespace orchard {

// A schema the compiler refuses; `where` is the JSON pointer into the schema ("" for the root).
class SchemaError : public Error {
 public:
  SchemaError(std::string where, const std::string& why)
      : Error("schema" + (where.empty() ? std::string() : " at " + where) + ": " + why), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Symbols a compiled schema may reach before it is refused as too large.
constexpr size_t kMaxSchemaSymbols = 200'000;

// The grammar of the JSON texts `schema` accepts (leading whitespace allowed, none after).
Grammar json_schema_grammar(const nlohmann::json& schema);

class JsonRules;
// For grammars with JSON inside (tool calls): adds `schema`'s rules to `b`, sharing `rules`'
// pieces, and returns the rule of its values; then build_schema_grammar(b, root) freezes it
// (its errors as SchemaError too).
uint32_t add_json_schema(GrammarBuilder& b, JsonRules& rules, const nlohmann::json& schema);
Grammar build_schema_grammar(const GrammarBuilder& b, uint32_t root);

// Any one JSON object (OpenAI's JSON mode, Ollama's format "json"): made once, shared.
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace orchard
