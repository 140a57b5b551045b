#pragma once
// Chat templates: turning a conversation into the prompt text a model was trained on.
//
// The model's own template (GGUF key `tokenizer.chat_template`, Jinja as on Hugging Face) is
// interpreted by a Jinja subset (serve/jinja/): statements if/elif/else, for (with loop.*,
// `else`, a filter condition, break/continue), set (names, unpacking, `ns.x =` on a
// namespace(), set blocks), macro, raw, generation; expressions with Python's literals,
// operators, `x if c else y`, attribute/item access, slicing, and the filters, tests and
// methods listed in serve/jinja/builtins.h. Variables: messages, add_generation_prompt,
// bos_token, eos_token, tools (none), date_string (today, "26 Jul 2024" style), and the
// functions raise_exception, strftime_now, namespace, range, dict. Not supported: include,
// extends, import, call and filter blocks, recursive loops, loop.cycle, `%` string formatting
// and str.format; tuples are lists; case mapping knows ASCII only. Undefined is lenient: an
// attribute of something undefined is undefined rather than an error.
//
// When the template cannot be parsed or rendered, a built-in renderer for the family its
// markers reveal takes over (chat_families.h). If the template refuses the conversation with
// raise_exception() and the conversation starts with a system message, it is first rendered
// again with the system text folded into the first user message ("system\n\nuser"), which is
// how templates without a system role (Gemma 1/2, Mistral v0.1) are meant to receive one.
// With no template at all the family is "plain": each message as "role: content\n", then
// "assistant:" when a generation prompt is asked for.
//
// Rendered prompts contain special-token text (e.g. "<|eot_id|>", and often the BOS text
// itself): tokenize them with parse_special, and without adding a second BOS when the prompt
// already starts with the BOS text.
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "serve/jinja/template.h"
#include "serve/tool_calls.h"

namespace orchard {
class GGUFFile;
class Tokenizer;
}  // namespace orchard

namespace orchard::serve {

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // system | user | assistant | tool
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made
  std::string tool_call_id;          // tool: the call this answers
  std::string name;                  // tool: the tool's name
};

class ChatTemplate {
 public:
  // From `tokenizer.chat_template` (absent: "plain"), with the tokenizer's BOS/EOS text for
  // the template's bos_token/eos_token.
  static ChatTemplate from_gguf(const GGUFFile& file, const Tokenizer& tok);
  // An empty `jinja` means no template ("plain"). Never throws for bad template text: a
  // template that does not parse falls back to its family's renderer, or (unknown family)
  // makes render() throw the parse error.
  static ChatTemplate from_source(std::string jinja, std::string bos, std::string eos);

  // Throws orchard::Error naming the template line at fault (jinja::RaisedError, a subclass,
  // when the template itself refused the conversation) if neither the template nor a
  // built-in renderer can produce the prompt.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // The same with tools offered. A template that writes tools in a format tool_calls.h knows
  // (tool_format() other than "generic") gets them as Hugging Face passes them: `tools` as
  // [{"type": "function", "function": {name, description, parameters}}], assistant messages'
  // `tool_calls` as [{"id", "type": "function", "function": {name, arguments}}], tool messages
  // with `tool_call_id` and `name`. Any other gets the generic format: the tools described at
  // the head of the system message, calls written as JSON, results as user turns.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const std::vector<ToolSpec>& tools) const;
  // How this model writes tool calls (serve/tool_calls.h); generic without a template.
  ToolFormat calls_format() const;
  // The same as a name: "hermes", "llama3", "mistral", "deepseek" or "generic".
  std::string tool_format() const { return tool_format_name(calls_format()); }

  // "llama2", "llama3", "chatml", "mistral", "gemma", "phi3", "zephyr", "jinja" (unknown
  // family, interpreted only) or "plain" (no template).
  const std::string& family() const { return family_; }
  // End-of-turn markers to stop generation on: the family's, any known marker the template
  // text mentions, and the EOS text; "plain" adds "\nuser:".
  std::vector<std::string> stop_strings() const;
  bool parses_special() const { return true; }
  const std::string& source() const { return source_; }
  // Fixes the date strftime_now() and date_string report (default: today, local time).
  void set_today(int year, int month, int day);

 private:
  std::string source_, bos_, eos_, family_;
  std::optional<jinja::Template> program_;  // empty when there is no template or it did not parse
  std::string parse_error_;
  std::optional<std::tm> today_;

  std::string interpret(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::vector<ToolSpec>& tools = {}) const;
};

}  // namespace orchard::serve
