#include "serve/chat_families.h"

namespace orchard::serve {
namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

// Python's str.strip(), which the templates apply through `| py_strip` and `.strip()`.
std::string_view py_strip(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) + 1 - b);
}

// The leading system message, if any, and the turns after it.
struct Split {
  const ChatMessage* system = nullptr;
  std::vector<const ChatMessage*> turns;
};

Split split_system(const std::vector<ChatMessage>& messages) {
  Split s;
  for (size_t k = 0; k < messages.size(); ++k) {
    if (k == 0 && messages[k].role == "system") s.system = &messages[k];
    else s.turns.push_back(&messages[k]);
  }
  return s;
}

std::string llama2(const std::vector<ChatMessage>& messages, std::string_view bos, std::string_view eos) {
  const Split s = split_system(messages);
  std::string out;
  for (size_t k = 0; k < s.turns.size(); ++k) {
    std::string content = s.turns[k]->content;
    if (k == 0 && s.system) content = "<<SYS>>\n" + s.system->content + "\n<</SYS>>\n\n" + content;
    if (s.turns[k]->role == "assistant") {
      out += " ";
      out += py_strip(content);
      out += " ";
      out += eos;
    } else {
      out += bos;
      out += "[INST] ";
      out += py_strip(content);
      out += " [/INST]";
    }
  }
  return out;
}

std::string mistral(const std::vector<ChatMessage>& messages, std::string_view bos, std::string_view eos) {
  const Split s = split_system(messages);
  size_t last_user = s.turns.size();
  for (size_t k = 0; k < s.turns.size(); ++k)
    if (s.turns[k]->role != "assistant") last_user = k;
  std::string out(bos);
  for (size_t k = 0; k < s.turns.size(); ++k) {
    if (s.turns[k]->role == "assistant") {
      out += " ";
      out += py_strip(s.turns[k]->content);
      out += eos;
      continue;
    }
    out += "[INST] ";
    if (k == last_user && s.system) out += s.system->content + "\n\n";
    out += s.turns[k]->content;
    out += "[/INST]";
  }
  return out;
}

std::string gemma(const std::vector<ChatMessage>& messages, bool gen, std::string_view bos) {
  const Split s = split_system(messages);
  std::string out(bos);
  for (size_t k = 0; k < s.turns.size(); ++k) {
    out += "<start_of_turn>";
    out += s.turns[k]->role == "assistant" ? "model" : "user";
    out += "\n";
    if (k == 0 && s.system) out += s.system->content + "\n\n";
    out += py_strip(s.turns[k]->content);
    out += "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// The formats that wrap every message the same way: prefix, role, middle, content, suffix.
struct Wrap {
  std::string_view begin, after_role, end;
  bool trim_content;
};

std::string wrapped(const std::vector<ChatMessage>& messages, const Wrap& w, std::string_view end_extra) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += w.begin;
    out += m.role;
    out += w.after_role;
    out += w.trim_content ? py_strip(m.content) : std::string_view(m.content);
    out += w.end;
    out += end_extra;
  }
  return out;
}

}  // namespace

std::string detect_family(std::string_view source) {
  if (source.empty()) return "plain";
  if (has(source, "<|im_start|>")) return "chatml";
  if (has(source, "<|start_header_id|>")) return "llama3";
  if (has(source, "<start_of_turn>")) return "gemma";
  if (has(source, "[INST]")) return has(source, "<<SYS>>") ? "llama2" : "mistral";
  if (has(source, "<|user|>")) {
    if (has(source, "<|end|>")) return "phi3";
    if (has(source, "</s>") || has(source, "eos_token")) return "zephyr";
  }
  return "jinja";
}

bool has_builtin_renderer(std::string_view family) {
  for (std::string_view f : {"llama2", "llama3", "chatml", "mistral", "gemma", "phi3", "zephyr", "plain"})
    if (family == f) return true;
  return false;
}

std::string render_family(std::string_view family, const std::vector<ChatMessage>& messages,
                          bool gen, std::string_view bos, std::string_view eos) {
  if (family == "llama2") return llama2(messages, bos, eos);
  if (family == "mistral") return mistral(messages, bos, eos);
  if (family == "gemma") return gemma(messages, gen, bos);
  if (family == "chatml") {
    std::string out = wrapped(messages, {"<|im_start|>", "\n", "<|im_end|>\n", false}, "");
    return gen ? out + "<|im_start|>assistant\n" : out;
  }
  if (family == "llama3") {
    std::string out(bos);
    out += wrapped(messages, {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", true}, "");
    return gen ? out + "<|start_header_id|>assistant<|end_header_id|>\n\n" : out;
  }
  if (family == "phi3") {
    std::string out = wrapped(messages, {"<|", "|>\n", "<|end|>\n", false}, "");
    return gen ? out + "<|assistant|>\n" : out + std::string(eos);
  }
  if (family == "zephyr") {
    std::string out = wrapped(messages, {"<|", "|>\n", "", false}, std::string(eos) + "\n");
    return gen ? out + "<|assistant|>\n" : out;
  }
  if (family == "plain") {
    std::string out = wrapped(messages, {"", ": ", "\n", false}, "");
    return gen ? out + "assistant:" : out;
  }
  throw orchard::Error("chat template: no built-in format for family '" + std::string(family) + "'");
}

std::vector<std::string> family_stop_strings(std::string_view family) {
  if (family == "chatml") return {"<|im_end|>"};
  if (family == "llama3") return {"<|eot_id|>"};
  if (family == "gemma") return {"<end_of_turn>"};
  if (family == "phi3") return {"<|end|>"};
  if (family == "plain") return {"\nuser:"};
  return {};
}

}  // namespace orchard::serve
