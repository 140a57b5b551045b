#include "serve/structured_output.h"

#include "model/grammar/json_schema.h"
#include "serve/api_error.h"
#include "serve/grammar_cache.h"

namespace orchard::serve {
namespace {

using json = nlohmann::json;

GrammarCache schemas(32);

}  // namespace

std::shared_ptr<const Grammar> schema_grammar(const json& schema, const std::string& field) {
  const std::string key = schema.dump(-1, ' ', false, json::error_handler_t::replace);
  if (key.size() > kMaxSchemaBytes)
    throw ApiError::bad_request("'" + field + "' is too large (" + std::to_string(key.size()) + " bytes; at most " +
                                    std::to_string(kMaxSchemaBytes) + ")",
                                field);
  try {
    return schemas.get(key, [&] { return json_schema_grammar(schema); });
  } catch (const SchemaError& e) {
    throw ApiError::bad_request("'" + field + "': " + e.what(), field);
  } catch (const json::exception& e) {  // a value of an unexpected type the compiler read
    throw ApiError::bad_request("'" + field + "': " + e.what(), field);
  }
}

std::shared_ptr<const Grammar> read_response_format(const json& f) {
  const json type = f.is_object() && f.contains("type") ? f["type"] : json();
  if (type == "text") return nullptr;
  if (type == "json_object") return json_object_grammar();
  if (type == "json_schema") {
    if (!f.contains("json_schema") || !f["json_schema"].is_object())
      throw ApiError::bad_request("'response_format.json_schema' must be an object with a 'schema'",
                                  "response_format.json_schema");
    const json& js = f["json_schema"];
    if (js.contains("name") && !js["name"].is_string())
      throw ApiError::bad_request("'response_format.json_schema.name' must be a string", "response_format.json_schema.name");
    if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
      throw ApiError::bad_request("'response_format.json_schema.strict' must be a boolean",
                                  "response_format.json_schema.strict");
    // No schema: any JSON value, as OpenAI reads it.
    return schema_grammar(js.contains("schema") ? js["schema"] : json::object(), "response_format.json_schema.schema");
  }
  throw ApiError::bad_request(
      "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", "
      "\"json_schema\": {\"name\": …, \"schema\": …}}",
      "response_format");
}

std::shared_ptr<const Grammar> read_ollama_format(const json& format) {
  if (format.is_null() || format == "") return nullptr;
  if (format == "json") return json_object_grammar();
  if (format.is_object()) return schema_grammar(format, "format");
  throw ApiError::bad_request("'format' must be \"json\" or a JSON schema object", "format");
}

}  // namespace orchard::serve
