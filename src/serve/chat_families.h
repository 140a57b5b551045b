#pragma once
// Built-in prompt formats of the common chat-model families, used when a model's template
// cannot be interpreted. Each reproduces what the family's published template renders for a
// conversation of system / user / assistant turns (checked against the real templates in
// tests/serve/chat_template_test.cpp); roles the family has no place for are sent as user
// turns.
#include <string>
#include <string_view>
#include <vector>

#include "serve/chat_template.h"

namespace orchard::serve {

// The family whose markers the template text carries: "chatml" (<|im_start|>), "llama3"
// (<|start_header_id|>), "gemma" (<start_of_turn>), "llama2" ([INST] with <<SYS>>),
// "mistral" ([INST]), "phi3" (<|user|> with <|end|>), "zephyr" (<|user|> with </s> or
// eos_token); else "jinja", or "plain" for empty text.
std::string detect_family(std::string_view source);

// Whether render_family knows `family`.
bool has_builtin_renderer(std::string_view family);

// Formats: llama2 — bos "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} eos…
// (no generation prompt: the prompt ends after [/INST]); mistral (v0.3) — bos "[INST] {user}[/INST]
// {assistant}eos…", system text leading the last user turn; chatml — "<|im_start|>{role}\n
// {content}<|im_end|>\n"…; llama3 — bos "<|start_header_id|>{role}<|end_header_id|>\n\n{content}
// <|eot_id|>"…; gemma — bos "<start_of_turn>{user|model}\n{content}<end_of_turn>\n"…, system
// text leading the first user turn; phi3 — "<|{role}|>\n{content}<|end|>\n"…; zephyr —
// "<|{role}|>\n{content}{eos}\n"…; plain — "{role}: {content}\n"… then "assistant:".
std::string render_family(std::string_view family, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt, std::string_view bos, std::string_view eos);

// End-of-turn markers of a family ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>").
std::vector<std::string> family_stop_strings(std::string_view family);

}  // namespace orchard::serve
