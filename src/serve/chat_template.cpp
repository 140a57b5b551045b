#include "serve/chat_template.h"

#include <algorithm>

#include "model/gguf.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/chat_families.h"
#include "serve/tool_calls.h"

namespace orchard::serve {
namespace {

// End-of-turn markers worth stopping on wherever a template mentions them.
constexpr std::string_view kKnownMarkers[] = {
    "<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|END_OF_TURN_TOKEN|>",
    "<|end_of_turn|>", "<|EOT|>", "<|endoftext|>",
};

std::tm today_local() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// Templates without a system role get the system text at the head of the first user turn.
std::vector<ChatMessage> fold_system(const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> out(messages.begin() + 1, messages.end());
  if (!out.empty() && out[0].role == "user") out[0].content = messages[0].content + "\n\n" + out[0].content;
  else out.insert(out.begin(), ChatMessage{"user", messages[0].content});
  return out;
}

// The same 9 letters and digits for the same id (FNV-1a, in base 62).
std::string nine_char_id(const std::string& id) {
  static const char* digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out += digits[h % 62];
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_gguf(const GGUFFile& file, const Tokenizer& tok) {
  auto text = [&](TokenId id) { return id >= 0 && id < tok.vocab_size() ? tok.token_text(id) : std::string(); };
  return from_source(file.get_string("tokenizer.chat_template").value_or(""), text(tok.bos()), text(tok.eos()));
}

ChatTemplate ChatTemplate::from_source(std::string jinja, std::string bos, std::string eos) {
  ChatTemplate t;
  t.source_ = std::move(jinja);
  t.bos_ = std::move(bos);
  t.eos_ = std::move(eos);
  t.family_ = detect_family(t.source_);
  if (!t.source_.empty()) {
    try {
      t.program_ = jinja::Template::parse(t.source_);
    } catch (const orchard::Error& e) {
      t.parse_error_ = e.what();
    }
  }
  return t;
}

void ChatTemplate::set_today(int year, int month, int day) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = 12;
  std::time_t t = timegm(&tm);  // normalises the date and fills in the weekday
  gmtime_r(&t, &tm);
  today_ = tm;
}

std::string ChatTemplate::interpret(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                    const std::vector<ToolSpec>& tools) const {
  using ojson = nlohmann::ordered_json;
  const std::tm now = today_ ? *today_ : today_local();
  char date[64];
  const size_t n = std::strftime(date, sizeof date, "%d %b %Y", &now);
  ojson list = ojson::array();
  for (const ChatMessage& m : messages) {
    ojson msg = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (const ToolCall& c : m.tool_calls)
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ojson(c.arguments)}}}});
      msg["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) msg["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) msg["name"] = m.name;
    list.push_back(std::move(msg));
  }
  ojson tool_list = nullptr;
  if (!tools.empty()) {
    tool_list = ojson::array();
    for (const ToolSpec& t : tools)
      tool_list.push_back({{"type", "function"},
                           {"function", {{"name", t.name}, {"description", t.description}, {"parameters", ojson(t.parameters)}}}});
  }
  const ojson globals = {
      {"messages", std::move(list)},
      {"add_generation_prompt", add_generation_prompt},
      {"bos_token", bos_},
      {"eos_token", eos_},
      {"tools", std::move(tool_list)},
      {"date_string", std::string(date, n)},
  };
  return program_->render(globals, now);
}

ToolFormat ChatTemplate::calls_format() const {
  if (!program_) return ToolFormat::Generic;
  return detect_tool_format(source_, family_);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::vector<ToolSpec>& tools) const {
  if (tools.empty()) return render(messages, add_generation_prompt);
  const ToolFormat format = calls_format();
  if (format == ToolFormat::Mistral) {
    // Mistral's template insists on call ids of 9 letters and digits: the API's ids, mapped.
    std::vector<ChatMessage> renamed = messages;
    for (ChatMessage& m : renamed) {
      for (ToolCall& c : m.tool_calls) c.id = nine_char_id(c.id);
      if (!m.tool_call_id.empty()) m.tool_call_id = nine_char_id(m.tool_call_id);
    }
    return interpret(renamed, add_generation_prompt, tools);
  }
  if (format != ToolFormat::Generic) return interpret(messages, add_generation_prompt, tools);
  // Generic: the tools at the head of the system message, calls as the JSON the model is asked
  // to write, results as user turns (every template has those).
  std::vector<ChatMessage> plain;
  const std::string prompt = generic_tool_prompt(tools);
  const bool has_system = !messages.empty() && messages[0].role == "system";
  plain.push_back({"system", has_system ? messages[0].content + "\n\n" + prompt : prompt});
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      std::string text = m.content;
      for (const ToolCall& c : m.tool_calls) text += (text.empty() ? "" : "\n") + generic_call_text(c);
      plain.push_back({"assistant", text});
    } else if (m.role == "tool") {
      plain.push_back({"user", "Result of tool " + (m.name.empty() ? m.tool_call_id : m.name) + ": " + m.content});
    } else {
      plain.push_back({m.role, m.content});
    }
  }
  return render(plain, add_generation_prompt);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  const bool builtin = has_builtin_renderer(family_);
  if (!program_) {
    if (!builtin) throw orchard::Error(parse_error_);
    return render_family(family_, messages, add_generation_prompt, bos_, eos_);
  }
  try {
    return interpret(messages, add_generation_prompt);
  } catch (const jinja::RaisedError&) {
    if (messages.size() > 1 && messages[0].role == "system") {
      try {
        return interpret(fold_system(messages), add_generation_prompt);
      } catch (const orchard::Error&) {
        // Report (or fall back from) the first refusal, not the retry's.
      }
    }
    if (!builtin) throw;
  } catch (const orchard::Error&) {
    if (!builtin) throw;
  }
  return render_family(family_, messages, add_generation_prompt, bos_, eos_);
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  std::vector<std::string> out = family_stop_strings(family_);
  auto add = [&](std::string_view s) {
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.emplace_back(s);
  };
  for (std::string_view marker : kKnownMarkers)
    if (source_.find(marker) != std::string::npos) add(marker);
  add(eos_);
  return out;
}

}  // namespace orchard::serve
