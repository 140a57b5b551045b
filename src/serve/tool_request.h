#pragma once
// Reading the tools a request offers and its tool choice, per API, with every bad field a 400
// naming it:
//   OpenAI and Ollama  "tools": [{"type": "function", "function": {name, description, parameters}}],
//                      "tool_choice": "auto" | "none" | "required" | {"type": "function",
//                      "function": {"name": …}} (Ollama has no tool_choice; Orchard reads the same
//                      field there too)
//   Anthropic          "tools": [{name, description, input_schema}],
//                      "tool_choice": {"type": "auto" | "any" | "tool" | "none", "name": …}
// and the calls an assistant message made, for the conversation's history.
#include <nlohmann/json.hpp>

#include "serve/tool_calls.h"

namespace orchard::serve {

ToolRequest read_function_tools(const nlohmann::json& body);
ToolRequest read_anthropic_tools(const nlohmann::json& body);

// An assistant message's "tool_calls" (OpenAI: arguments as JSON text; Ollama: as an object).
std::vector<ToolCall> read_tool_calls(const nlohmann::json& calls, const std::string& field);

}  // namespace orchard::serve
