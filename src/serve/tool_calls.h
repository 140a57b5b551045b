#pragma once
// Tool calls in a model's own words. Each family writes its calls its own way, as its chat
// template teaches it:
//   hermes   (Qwen 2.5/3, Hermes, chatml templates with tools)
//            <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>   (one or more)
//   llama3   (Llama 3.1–3.3)  {"name": "f", "parameters": {…}}, perhaps after <|python_tag|>
//   mistral  (Mistral v0.3)   [TOOL_CALLS] [{"name": "f", "arguments": {…}}, …]
//            (and the later [TOOL_CALLS]f[ARGS]{…})
//   deepseek (DeepSeek V3/R1) <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f
//            ```json {…} ```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜> (and V3.1's f<｜tool▁sep｜>{…})
//   generic  (any other model: the tools are described in the system message, service.cpp)
//            {"tool_call": {"name": "f", "arguments": {…}}}
// parse_tool_calls reads a finished reply into text and calls (a call naming no offered tool
// stays text); forced_call_grammar makes the grammar of exactly one well-formed call, for
// tool_choice "required" or a named tool; tool_safe_prefix says how much of a reply still being
// written can be streamed as text before a call might begin.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/grammar/grammar.h"
#include "serve/tool_call.h"

namespace orchard::serve {

enum class ToolFormat { Hermes, Llama3, Mistral, DeepSeek, Generic };
const char* tool_format_name(ToolFormat f);
// From the chat template's text (its markers) and family.
ToolFormat detect_tool_format(std::string_view template_source, std::string_view family);

enum class ToolChoice { Auto, None, Required, Named };

struct ToolRequest {
  std::vector<ToolSpec> tools;
  ToolChoice choice = ToolChoice::Auto;
  std::string named;  // ToolChoice::Named
  bool active() const { return !tools.empty() && choice != ToolChoice::None; }
  bool forced() const { return active() && (choice == ToolChoice::Required || choice == ToolChoice::Named); }
};

// Every tool's name ([A-Za-z0-9_.-], 1–64, unique) and schema (must compile), and a named choice
// among them; a 400 naming `field` (e.g. "tools[2].function.parameters") otherwise.
void check_tools(const ToolRequest& r, const std::string& field, const std::string& choice_field);

struct ToolReply {
  std::string content;          // what is not a call, trimmed
  std::vector<ToolCall> calls;  // ids left empty: the API names them
};
ToolReply parse_tool_calls(ToolFormat f, std::string_view text, const std::vector<ToolSpec>& tools);

// Exactly one call in format f: to r.named, or (Required) to any offered tool, its arguments
// following that tool's schema.
std::shared_ptr<const Grammar> forced_call_grammar(ToolFormat f, const ToolRequest& r);

// How many leading bytes of `text` (a reply still being written) are text for sure: the rest
// may be (the start of) a call and is held back until the reply ends.
size_t tool_safe_prefix(ToolFormat f, std::string_view text);

// A streamed reply with tools offered: push() each piece of text and send what it returns as
// text; what might be a call is held until finish(), which returns the rest of the text and the
// calls.
class ToolStream {
 public:
  ToolStream(ToolFormat f, std::vector<ToolSpec> tools) : format_(f), tools_(std::move(tools)) {}
  std::string push(const std::string& piece);
  ToolReply finish();

 private:
  ToolFormat format_;
  std::vector<ToolSpec> tools_;
  std::string text_;
  size_t sent_ = 0;
};

// The generic format's instructions, for the system message, and a call as the model writes it.
std::string generic_tool_prompt(const std::vector<ToolSpec>& tools);
std::string generic_call_text(const ToolCall& call);

}  // namespace orchard::serve
