#include "serve/tool_request.h"

#include "serve/api_error.h"

namespace orchard::serve {
namespace {

using json = nlohmann::json;

std::string string_at(const json& o, const char* key, const std::string& field, bool required) {
  if (!o.contains(key) || o[key].is_null()) {
    if (required) throw ApiError::bad_request("'" + field + "." + key + "' is required", field + "." + key);
    return {};
  }
  if (!o[key].is_string()) throw ApiError::bad_request("'" + field + "." + key + "' must be a string", field + "." + key);
  return o[key].get<std::string>();
}

json schema_at(const json& o, const char* key, const std::string& field) {
  if (!o.contains(key) || o[key].is_null()) return json::object();
  if (!o[key].is_object()) throw ApiError::bad_request("'" + field + "." + key + "' must be a JSON schema object", field + "." + key);
  return o[key];
}

// Every entry of the body's "tools", each an object, read by read(tool, "tools[i]").
template <class Read>
void read_tool_list(const json& body, ToolRequest& r, Read read) {
  if (!body.contains("tools") || body["tools"].is_null()) return;
  if (!body["tools"].is_array()) throw ApiError::bad_request("'tools' must be a list of tools", "tools");
  for (size_t i = 0; i < body["tools"].size(); ++i) {
    const json& t = body["tools"][i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw ApiError::bad_request("'" + at + "' must be an object", at);
    r.tools.push_back(read(t, at));
  }
}

}  // namespace

ToolRequest read_function_tools(const json& body) {
  ToolRequest r;
  read_tool_list(body, r, [](const json& t, const std::string& at) {
    if (t.contains("type") && t["type"] != "function")
      throw ApiError::bad_request("'" + at + ".type' must be \"function\"", at + ".type");
    if (!t.contains("function") || !t["function"].is_object())
      throw ApiError::bad_request("'" + at + ".function' must be an object with a name", at + ".function");
    const json& f = t["function"];
    return ToolSpec{string_at(f, "name", at + ".function", true), string_at(f, "description", at + ".function", false),
                    schema_at(f, "parameters", at + ".function")};
  });
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& c = body["tool_choice"];
    if (c == "auto") r.choice = ToolChoice::Auto;
    else if (c == "none") r.choice = ToolChoice::None;
    else if (c == "required") r.choice = ToolChoice::Required;
    else if (c.is_object() && c.contains("function") && c["function"].is_object()) {
      r.choice = ToolChoice::Named;
      r.named = string_at(c["function"], "name", "tool_choice.function", true);
    } else {
      throw ApiError::bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                                  "\"function\": {\"name\": …}}",
                                  "tool_choice");
    }
  }
  check_tools(r, "tools", "tool_choice");
  return r;
}

ToolRequest read_anthropic_tools(const json& body) {
  ToolRequest r;
  read_tool_list(body, r, [](const json& t, const std::string& at) {
    if (t.contains("type") && t["type"].is_string() && t["type"] != "custom")
      throw ApiError::bad_request("'" + at + ".type' " + t["type"].dump() + ": only custom tools (with an input_schema) are supported",
                                  at + ".type");
    return ToolSpec{string_at(t, "name", at, true), string_at(t, "description", at, false), schema_at(t, "input_schema", at)};
  });
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& c = body["tool_choice"];
    const json type = c.is_object() && c.contains("type") ? c["type"] : json();
    if (type == "auto") r.choice = ToolChoice::Auto;
    else if (type == "none") r.choice = ToolChoice::None;
    else if (type == "any") r.choice = ToolChoice::Required;
    else if (type == "tool") {
      r.choice = ToolChoice::Named;
      r.named = string_at(c, "name", "tool_choice", true);
    } else {
      throw ApiError::bad_request("'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}", "tool_choice");
    }
  }
  check_tools(r, "tools", "tool_choice");
  return r;
}

std::vector<ToolCall> read_tool_calls(const json& calls, const std::string& field) {
  if (!calls.is_array()) throw ApiError::bad_request("'" + field + "' must be a list of calls", field);
  std::vector<ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      throw ApiError::bad_request("'" + at + "' must be {\"function\": {\"name\": …, \"arguments\": …}}", at);
    const json& f = c["function"];
    ToolCall call;
    call.id = string_at(c, "id", at, false);
    call.name = string_at(f, "name", at + ".function", true);
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      json args = f["arguments"];
      if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, false);
      if (!args.is_object())
        throw ApiError::bad_request("'" + at + ".function.arguments' must be a JSON object or its text", at + ".function.arguments");
      call.arguments = std::move(args);
    }
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace orchard::serve
