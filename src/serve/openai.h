#pragma once
// OpenAI's chat/completions shapes, apart from where the tokens come from: `orchard serve`
// answers from its scheduler, the network's coordinator from a node's streamed output, and
// both read requests and write answers (whole, or as server-sent events) with these.
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/engine.h"
#include "serve/chat_template.h"
#include "serve/stream.h"
#include "serve/tool_calls.h"

namespace orchard::serve {

// A chat or completions request, checked (every bad field is a 400 ApiError naming it).
// Most choices (`n`) one request may ask for.
constexpr int kMaxChoices = 16;

struct OpenAIRequest {
  bool chat = false;                  // /v1/chat/completions, else /v1/completions
  GenerateOptions options;            // the defaults given, overridden by the body's fields
  bool stream = false;
  int n = 1;                          // choices: generations of the same prompt (seeds seed, seed + 1, …)
  bool include_usage = false;         // stream_options.include_usage
  std::string model;                  // as the client named it; empty when absent
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  ToolRequest tools;                  // chat: tools and tool_choice
  ToolFormat tool_format = ToolFormat::Generic;  // how the model writes calls (set by the server)
};

OpenAIRequest read_openai_request(const nlohmann::json& body, bool chat, const GenerateOptions& defaults);

// Answers `r` from `stream` under the name `model`: one JSON object once the stream is done, or
// SSE chunks as text arrives ending in "data: [DONE]". A generation that failed is a 500 error
// (whole), or an error event (streamed).
void respond_openai(httplib::Response& res, const OpenAIRequest& r, std::shared_ptr<Stream> stream,
                    const std::string& model);
// The same with r.n streams, one per choice (index i from streams[i]).
void respond_openai(httplib::Response& res, const OpenAIRequest& r, std::vector<std::shared_ptr<Stream>> streams,
                    const std::string& model);

}  // namespace orchard::serve
