// Request bodies come from anyone who can reach the port: any bytes must become generation
// options and messages (and OpenAI's whole request) or an ApiError (a 400), never a crash, a
// leak or an exception of another kind.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/grammar/grammar_matcher.h"
#include "serve/openai.h"
#include "serve/request_params.h"
#include "serve/structured_output.h"
#include "serve/tool_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orchard::serve;
  const std::string body(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = parse_body(body);
    orchard::GenerateOptions o;
    read_generation_params(j, o);
    if (j.contains("options") && j["options"].is_object()) {
      ParamNames ollama;
      ollama.max_tokens = "num_predict";
      read_generation_params(j["options"], o, ollama);
    }
    read_bool(j, "stream", false);
    if (j.contains("messages")) read_messages(j["messages"]);
    if (j.contains("prompt")) read_string(j, "prompt");
  } catch (const ApiError&) {
  }
  // OpenAI's whole request, both routes: n, logprobs, response_format (schemas compiled to
  // grammars), stream_options, model. A grammar then reads the body itself, byte by byte.
  for (const bool chat : {true, false}) {
    try {
      const OpenAIRequest r = read_openai_request(parse_body(body), chat, orchard::GenerateOptions{});
      if (r.options.grammar) {
        orchard::GrammarMatcher m(r.options.grammar);
        for (size_t i = 0; i < body.size() && m.feed(static_cast<unsigned char>(body[i])); ++i) m.closing_length();
        m.complete();
        m.can_continue();
      }
    } catch (const ApiError&) {
    }
  }
  // Ollama's format: "json" or a schema; Anthropic's tools and tool_choice; a forced call's
  // grammar for whatever tools were read.
  try {
    const nlohmann::json j = parse_body(body);
    if (j.contains("format")) read_ollama_format(j["format"]);
    const ToolRequest tools = read_anthropic_tools(j);
    if (tools.forced()) forced_call_grammar(ToolFormat::Hermes, tools);
  } catch (const ApiError&) {
  }
  try {
    const ToolRequest tools = read_function_tools(parse_body(body));
    if (tools.forced()) forced_call_grammar(ToolFormat::DeepSeek, tools);
  } catch (const ApiError&) {
  }
  return 0;
}
