// Chat templates come from model files: any template text must render, fall back to a family
// format, or give an orchard::Error, within the interpreter's limits; never crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "serve/chat_template.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using orchard::serve::ChatMessage;
  static const std::vector<ChatMessage> messages = {
      {"system", "You are a helpful assistant."},
      {"user", "Hello!"},
      {"assistant", "  Hi! <|im_end|> {{ not a tag }}  "},
      {"tool", "{\"result\": [1, 2.5, null]}"},
      {"user", "What is 2+2?"},
  };
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = orchard::serve::ChatTemplate::from_source(source, "<s>", "</s>");
  t.set_today(2024, 7, 26);
  for (bool generation_prompt : {true, false}) {
    try {
      t.render(messages, generation_prompt);
    } catch (const orchard::Error&) {
    }
  }
  t.stop_strings();
  return 0;
}
