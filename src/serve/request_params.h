#pragma once
// Reading a request's JSON body and its generation parameters, with the checks every API
// shares: each bad field is refused with a 400 that names it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/engine.h"
#include "serve/api_error.h"
#include "serve/chat_template.h"

namespace orchard::serve {

// Parses a body; malformed JSON or a non-object is a 400 saying where it broke.
nlohmann::json parse_body(const std::string& body);

// Field names differ between APIs; the meanings do not.
struct ParamNames {
  std::string max_tokens = "max_tokens";
  std::string stop = "stop";
  std::string top_k = "top_k";
  std::string repeat_penalty = "repeat_penalty";
};

// max_tokens, temperature, top_p, top_k, min_p, seed, stop, repeat_penalty from `j` into
// `o` (fields absent keep `o`'s values). Wrong types and out-of-range values are 400s.
void read_generation_params(const nlohmann::json& j, GenerateOptions& o, const ParamNames& names = {});

// A list of chat messages: [{"role": …, "content": string | [{"type":"text","text":…}]}].
std::vector<ChatMessage> read_messages(const nlohmann::json& messages, const std::string& field = "messages");

// A required string field.
std::string read_string(const nlohmann::json& j, const std::string& field);
bool read_bool(const nlohmann::json& j, const std::string& field, bool fallback);

}  // namespace orchard::serve
