#pragma once
// Structured output over the APIs: OpenAI's response_format (json_object, json_schema) and
// Ollama's format ("json" or a schema) become the grammar the scheduler holds sampling to
// (model/grammar/). A schema the compiler refuses is a 400 naming the field and the place in the
// schema; compiled grammars are kept (the last 32, by schema text), since agents send the same
// schema with every request.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/grammar/grammar.h"

namespace orchard::serve {

// Largest schema accepted, as compact JSON text.
constexpr size_t kMaxSchemaBytes = 256 * 1024;

// The grammar of `schema`; `field` names it in errors ("response_format.json_schema.schema").
std::shared_ptr<const Grammar> schema_grammar(const nlohmann::json& schema, const std::string& field);

// OpenAI's response_format: null for {"type": "text"}.
std::shared_ptr<const Grammar> read_response_format(const nlohmann::json& format);

// Ollama's format: "json", or a JSON schema object; null for "" or null.
std::shared_ptr<const Grammar> read_ollama_format(const nlohmann::json& format);

}  // namespace orchard::serve
