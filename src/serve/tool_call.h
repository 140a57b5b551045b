#pragma once
// The tool-calling types every API shares: a tool a request offers and a call a model makes.
#include <nlohmann/json.hpp>
#include <string>

namespace orchard::serve {

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters = nlohmann::json::object();  // a JSON schema for the arguments
};

struct ToolCall {
  std::string id;  // as the API spells them: "call_…", "toolu_…"
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
};

}  // namespace orchard::serve
