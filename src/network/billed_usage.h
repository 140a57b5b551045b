#pragma once
// What the coordinator bills and credits is what it can count itself, not what a node says
// (issue 26): generated tokens are the ones the node streamed through the coordinator, and
// prompt tokens are at most what the request's text could make.
#include <cstdint>
#include <nlohmann/json.hpp>

namespace orchard::network {

// Tokens a template and tokenizer could make of a chat/completions request at most: every
// tokenizer the engine reads (byte-level BPE, SentencePiece with byte fallback) spends at least
// one byte of text per token, so the bytes of every string in `messages` and `prompt`, plus
// kTemplateTokens per message and once for the whole (role markers, BOS, a template's own
// system line). An over-estimate for real text by design: it only caps a node's claim.
inline constexpr int64_t kTemplateTokens = 64;
int64_t prompt_token_bound(const nlohmann::json& request);

}  // namespace orchard::network
