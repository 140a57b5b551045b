// Request bodies come from anyone who can reach the port: any bytes must become generation
// options and messages (and OpenAI's whole request) or an ApiError (a 400), never a crash, a
// leak or an exception of another kind.
#include <cstddef>
#include <cstdint>
#include <string>

#include "serve/openai.h"
#include "serve/request_params.h"

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
  // OpenAI's whole request, both routes: n, logprobs, response_format, stream_options, model.
  for (const bool chat : {true, false}) {
    try {
      read_openai_request(parse_body(body), chat, orchard::GenerateOptions{});
    } catch (const ApiError&) {
    }
  }
  return 0;
}
