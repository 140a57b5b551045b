#include "serve/tool_calls.h"

#include <optional>
#include <set>

#include "model/grammar/json_rules.h"
#include "model/grammar/json_schema.h"
#include "serve/api_error.h"
#include "serve/grammar_cache.h"

namespace orchard::serve {
namespace {

using json = nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistral = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";
// DeepSeek's markers: fullwidth bars (U+FF5C) around words joined by U+2581.
constexpr std::string_view kDsCallsBegin = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsCallsEnd = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view kDsCallBegin = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsCallEnd = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view kDsSep = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>";

std::string_view trim_space(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The end of the JSON object or array starting at s[from] (one past its closer), or npos.
size_t json_end(std::string_view s, size_t from) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<json> parse(std::string_view s) {
  json j = json::parse(s.begin(), s.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

bool offered(const std::vector<ToolSpec>& tools, const std::string& name) {
  for (const ToolSpec& t : tools)
    if (t.name == name) return true;
  return false;
}

// {"name": …, "arguments" | "parameters": {…} or its JSON text} naming an offered tool.
std::optional<ToolCall> call_from(const json& o, const std::vector<ToolSpec>& tools) {
  if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.name = o["name"].get<std::string>();
  if (!offered(tools, call.name)) return std::nullopt;
  json args = json::object();
  if (o.contains("arguments")) args = o["arguments"];
  else if (o.contains("parameters")) args = o["parameters"];
  if (args.is_string()) {
    auto parsed = parse(args.get<std::string>());
    if (!parsed) return std::nullopt;
    args = *parsed;
  }
  if (!args.is_object()) return std::nullopt;
  call.arguments = std::move(args);
  return call;
}

ToolReply parse_hermes(std::string_view text, const std::vector<ToolSpec>& tools) {
  ToolReply r;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t k = text.find(kHermesOpen, pos);
    if (k == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, k - pos);
    const size_t start = k + kHermesOpen.size();
    const size_t end = text.find(kHermesClose, start);
    const std::string_view body = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    const size_t next = end == std::string_view::npos ? text.size() : end + kHermesClose.size();
    auto j = parse(trim_space(body));
    auto call = j ? call_from(*j, tools) : std::nullopt;
    if (call) r.calls.push_back(std::move(*call));
    else content += text.substr(k, next - k);
    pos = next;
  }
  r.content = trim_space(content);
  return r;
}

// One or more JSON objects, separated by blanks or ';', all calls; else the text stays text.
// The generic format wraps them: {"tool_call": {…}} or {"tool_calls": [{…}, …]}.
ToolReply parse_json_calls(std::string_view text, const std::vector<ToolSpec>& tools, bool generic) {
  std::string_view t = trim_space(text);
  if (!generic && starts_with(t, kPythonTag)) t = trim_space(t.substr(kPythonTag.size()));
  const ToolReply as_text{std::string(trim_space(text)), {}};
  ToolReply r;
  for (size_t pos = 0; pos < t.size();) {
    const size_t end = t[pos] == '{' ? json_end(t, pos) : std::string_view::npos;
    auto j = end == std::string_view::npos ? std::nullopt : parse(t.substr(pos, end - pos));
    if (!j) return as_text;
    json objects = json::array({*j});
    if (generic && j->contains("tool_call")) objects = json::array({(*j)["tool_call"]});
    else if (generic && j->contains("tool_calls") && (*j)["tool_calls"].is_array()) objects = (*j)["tool_calls"];
    for (const json& one : objects) {
      auto call = call_from(one, tools);
      if (!call) return as_text;
      r.calls.push_back(std::move(*call));
    }
    pos = end;
    while (pos < t.size() && (t[pos] == ';' || t[pos] == ' ' || t[pos] == '\n' || t[pos] == '\t' || t[pos] == '\r')) ++pos;
  }
  if (r.calls.empty()) r.content = trim_space(text);
  return r;
}

ToolReply parse_mistral(std::string_view text, const std::vector<ToolSpec>& tools) {
  const size_t k = text.find(kMistral);
  if (k == std::string_view::npos) return {std::string(trim_space(text)), {}};
  ToolReply r;
  r.content = trim_space(text.substr(0, k));
  std::string_view rest = trim_space(text.substr(k + kMistral.size()));
  const auto as_text = [&] { return ToolReply{std::string(trim_space(text)), {}}; };
  if (starts_with(rest, "[")) {
    auto j = parse(rest.substr(0, json_end(rest, 0)));
    if (!j || !j->is_array()) return as_text();
    for (const json& one : *j) {
      auto call = call_from(one, tools);
      if (!call) return as_text();
      r.calls.push_back(std::move(*call));
    }
    return r;
  }
  // name[ARGS]{…}, repeated with [TOOL_CALLS] between.
  while (!rest.empty()) {
    const size_t a = rest.find(kMistralArgs);
    if (a == std::string_view::npos) return as_text();
    const std::string_view args = trim_space(rest.substr(a + kMistralArgs.size()));
    const size_t end = json_end(args, 0);
    auto j = args.empty() || args[0] != '{' ? std::nullopt : parse(args.substr(0, end));
    auto call = j ? call_from(json{{"name", std::string(trim_space(rest.substr(0, a)))}, {"arguments", *j}}, tools) : std::nullopt;
    if (!call) return as_text();
    r.calls.push_back(std::move(*call));
    rest = trim_space(args.substr(end));
    if (starts_with(rest, kMistral)) rest = trim_space(rest.substr(kMistral.size()));
  }
  return r;
}

ToolReply parse_deepseek(std::string_view text, const std::vector<ToolSpec>& tools) {
  const size_t k = text.find(kDsCallsBegin);
  if (k == std::string_view::npos) return {std::string(trim_space(text)), {}};
  ToolReply r;
  r.content = trim_space(text.substr(0, k));
  size_t pos = k + kDsCallsBegin.size();
  for (;;) {
    const size_t b = text.find(kDsCallBegin, pos);
    if (b == std::string_view::npos) break;
    const size_t start = b + kDsCallBegin.size();
    const size_t end = text.find(kDsCallEnd, start);
    const std::string_view body = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    pos = end == std::string_view::npos ? text.size() : end + kDsCallEnd.size();
    const size_t sep = body.find(kDsSep);
    if (sep == std::string_view::npos) return {std::string(trim_space(text)), {}};
    std::string_view name = trim_space(body.substr(0, sep)), args = body.substr(sep + kDsSep.size());
    if (name == "function") {  // V3: type, name on the line after the separator, then fenced JSON
      const size_t nl = args.find('\n');
      name = trim_space(args.substr(0, nl));
      args = nl == std::string_view::npos ? std::string_view() : args.substr(nl + 1);
      args = trim_space(args);
      if (starts_with(args, "```json")) args = args.substr(7);
      else if (starts_with(args, "```")) args = args.substr(3);
      const size_t fence = args.rfind("```");
      if (fence != std::string_view::npos) args = args.substr(0, fence);
    }
    auto j = parse(trim_space(args));
    auto call = j ? call_from(json{{"name", std::string(name)}, {"arguments", *j}}, tools) : std::nullopt;
    if (!call) return {std::string(trim_space(text)), {}};
    r.calls.push_back(std::move(*call));
  }
  if (r.calls.empty()) return {std::string(trim_space(text)), {}};
  return r;
}

// How much of `text` cannot be the start of `marker` (found whole, or begun at the end).
size_t before_marker(std::string_view text, std::string_view marker) {
  const size_t k = text.find(marker);
  if (k != std::string_view::npos) return k;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  return text.size();
}

GrammarCache forced_calls(32);

}  // namespace

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3: return "llama3";
    case ToolFormat::Mistral: return "mistral";
    case ToolFormat::DeepSeek: return "deepseek";
    case ToolFormat::Generic: return "generic";
  }
  return "generic";
}

ToolFormat detect_tool_format(std::string_view source, std::string_view family) {
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolFormat::Hermes;
  if (source.find(kMistral) != std::string_view::npos) return ToolFormat::Mistral;
  if (source.find(kDsCallsBegin) != std::string_view::npos) return ToolFormat::DeepSeek;
  if (family == "llama3" && source.find("tools") != std::string_view::npos) return ToolFormat::Llama3;
  return ToolFormat::Generic;
}

void check_tools(const ToolRequest& r, const std::string& field, const std::string& choice_field) {
  std::set<std::string> names;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const ToolSpec& t = r.tools[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    bool ok = !t.name.empty() && t.name.size() <= 64;
    for (char c : t.name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
    if (!ok)
      throw ApiError::bad_request("'" + at + "' has name '" + t.name + "': tool names are 1–64 letters, digits, '_', '-' or '.'", at);
    if (!names.insert(t.name).second) throw ApiError::bad_request("'" + at + "': a second tool named '" + t.name + "'", at);
    if (!t.parameters.is_object()) throw ApiError::bad_request("'" + at + "': the parameters must be a JSON schema object", at);
    if (t.parameters.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() > 256 * 1024)
      throw ApiError::bad_request("'" + at + "': the parameters schema is larger than 256 KiB", at);
    try {
      GrammarBuilder b;
      JsonRules rules(b);
      build_schema_grammar(b, add_json_schema(b, rules, t.parameters));
    } catch (const SchemaError& e) {
      throw ApiError::bad_request("'" + at + "' parameters: " + e.what(), at);
    }
  }
  if (r.choice == ToolChoice::Named && !names.count(r.named))
    throw ApiError::bad_request("'" + choice_field + "' names '" + r.named + "', which is not among the tools offered", choice_field);
  if ((r.choice == ToolChoice::Required || r.choice == ToolChoice::Named) && r.tools.empty())
    throw ApiError::bad_request("'" + choice_field + "' asks for a tool call but no tools are offered", choice_field);
}

ToolReply parse_tool_calls(ToolFormat f, std::string_view text, const std::vector<ToolSpec>& tools) {
  switch (f) {
    case ToolFormat::Hermes: return parse_hermes(text, tools);
    case ToolFormat::Llama3: return parse_json_calls(text, tools, false);
    case ToolFormat::Mistral: return parse_mistral(text, tools);
    case ToolFormat::DeepSeek: return parse_deepseek(text, tools);
    case ToolFormat::Generic: return parse_json_calls(text, tools, true);
  }
  return {std::string(text), {}};
}

// One call in format f to any of `key_tools` ([name, parameters schema] pairs).
static Grammar compile_forced_call(ToolFormat f, const json& key_tools) {
  GrammarBuilder b;
  JsonRules rules(b);
  std::vector<GrammarSequence> calls;
  for (const json& t : key_tools) {
    const std::string name = t[0].get<std::string>();
    json schema = t[1];
    if (schema.empty()) schema = {{"type", "object"}};
    std::string before, after;
    switch (f) {
      case ToolFormat::Hermes:
        before = std::string(kHermesOpen) + "\n{\"name\": \"" + name + "\", \"arguments\": ";
        after = "}\n" + std::string(kHermesClose);
        break;
      case ToolFormat::Llama3:
        before = "{\"name\": \"" + name + "\", \"parameters\": ";
        after = "}";
        break;
      case ToolFormat::Mistral:
        before = std::string(kMistral) + " [{\"name\": \"" + name + "\", \"arguments\": ";
        after = "}]";
        break;
      case ToolFormat::DeepSeek:
        before = std::string(kDsCallsBegin) + std::string(kDsCallBegin) + "function" + std::string(kDsSep) + name + "\n```json\n";
        after = "\n```" + std::string(kDsCallEnd) + std::string(kDsCallsEnd);
        break;
      case ToolFormat::Generic:
        before = "{\"tool_call\": {\"name\": \"" + name + "\", \"arguments\": ";
        after = "}}";
        break;
    }
    GrammarSequence seq = GrammarBuilder::literal(before);
    seq.push_back(GrammarSymbol::ref(add_json_schema(b, rules, schema)));
    const GrammarSequence tail = GrammarBuilder::literal(after);
    seq.insert(seq.end(), tail.begin(), tail.end());
    calls.push_back(std::move(seq));
  }
  return build_schema_grammar(b, b.add_rule("root", std::move(calls)));
}

std::shared_ptr<const Grammar> forced_call_grammar(ToolFormat f, const ToolRequest& r) {
  json key_tools = json::array();
  for (const ToolSpec& t : r.tools)
    if (r.choice != ToolChoice::Named || t.name == r.named) key_tools.push_back({t.name, t.parameters});
  return forced_calls.get(std::string(tool_format_name(f)) + key_tools.dump(),
                          [&] { return compile_forced_call(f, key_tools); });
}

size_t tool_safe_prefix(ToolFormat f, std::string_view text) {
  switch (f) {
    case ToolFormat::Hermes: return before_marker(text, kHermesOpen);
    case ToolFormat::Mistral: return before_marker(text, kMistral);
    case ToolFormat::DeepSeek: return before_marker(text, kDsCallsBegin);
    case ToolFormat::Llama3:
    case ToolFormat::Generic: {
      // A call is the whole reply: hold it while it could still be one.
      const std::string_view t = trim_space(text);
      if (t.empty() || t[0] == '{') return 0;
      if (f == ToolFormat::Llama3 && (starts_with(t, kPythonTag) || starts_with(kPythonTag, t))) return 0;
      return text.size();
    }
  }
  return text.size();
}

std::string ToolStream::push(const std::string& piece) {
  text_ += piece;
  // Only the unsent tail is looked at (the text sent holds no marker), except where a call must
  // be the whole reply: there, once some text went out, the rest is text too.
  size_t safe;
  if (format_ == ToolFormat::Llama3 || format_ == ToolFormat::Generic)
    safe = sent_ > 0 ? text_.size() : tool_safe_prefix(format_, text_);
  else
    safe = sent_ + tool_safe_prefix(format_, std::string_view(text_).substr(sent_));
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return out;
}

ToolReply ToolStream::finish() {
  // Parse the whole reply; the text already sent is the head of its content.
  ToolReply r = parse_tool_calls(format_, text_, tools_);
  if (r.calls.empty()) {
    r.content = text_.substr(sent_);
  } else {
    const std::string_view head = trim_space(std::string_view(text_).substr(0, sent_));
    r.content = r.content.size() > head.size() && r.content.compare(0, head.size(), head) == 0
                    ? r.content.substr(head.size())
                    : std::string();
  }
  return r;
}

std::string generic_tool_prompt(const std::vector<ToolSpec>& tools) {
  std::string out = "You can call these tools:\n";
  for (const ToolSpec& t : tools) {
    out += "- " + t.name + (t.description.empty() ? "" : ": " + t.description) + "\n";
    out += "  arguments (JSON schema): " + t.parameters.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  out += "To call a tool, reply with only this JSON and nothing else:\n"
         "{\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}}\n"
         "A tool's result comes back in a message from \"tool\"; then answer the user.";
  return out;
}

std::string generic_call_text(const ToolCall& call) {
  return json{{"tool_call", {{"name", call.name}, {"arguments", call.arguments}}}}.dump(-1, ' ', false,
                                                                                        json::error_handler_t::replace);
}

}  // namespace orchard::serve
