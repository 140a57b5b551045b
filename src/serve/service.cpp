#include "serve/service.h"

#include <algorithm>

namespace orchard::serve {

Service::Service(Scheduler& scheduler, const Tokenizer& tok, ChatTemplate chat, Metrics& metrics, ModelInfo model,
                 ClusterView cluster, GenerateOptions defaults)
    : scheduler_(scheduler), tok_(tok), chat_(std::move(chat)), metrics_(metrics), model_(std::move(model)),
      cluster_(std::move(cluster)), defaults_(std::move(defaults)) {}

std::vector<TokenId> chat_prompt_tokens(const ChatTemplate& chat, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, GenerateOptions& o,
                                        const ToolRequest& tools) {
  std::string prompt;
  try {
    prompt = tools.active() ? chat.render(messages, true, tools.tools) : chat.render(messages, true);
  } catch (const Error& e) {
    // The model's own template refused the conversation (e.g. roles that must alternate).
    throw ApiError::bad_request(std::string("the chat template refused these messages: ") + e.what(), "messages");
  }
  for (const auto& s : chat.stop_strings())
    if (std::find(o.stop.begin(), o.stop.end(), s) == o.stop.end()) o.stop.push_back(s);
  // Turn markers are special-token text. BOS as the vocabulary asks, once: templates that
  // write the BOS text themselves would otherwise start with two.
  auto tokens = tok.encode(prompt, true, true);
  if (tokens.size() >= 2 && tok.bos() >= 0 && tokens[0] == tok.bos() && tokens[1] == tok.bos())
    tokens.erase(tokens.begin());
  if (tokens.empty()) throw ApiError::bad_request("the conversation renders to an empty prompt", "messages");
  if (tools.forced()) {
    try {
      o.grammar = forced_call_grammar(chat.calls_format(), tools);
    } catch (const Error& e) {  // each tool compiled alone; together they can still be too much
      throw ApiError::bad_request(std::string("the tools together: ") + e.what(), "tools");
    }
  }
  return tokens;
}


std::vector<TokenId> text_prompt_tokens(const Tokenizer& tok, const std::string& text) {
  auto t = tok.encode(text, true, false);
  if (t.empty()) throw ApiError::bad_request("the prompt is empty", "prompt");
  return t;
}

std::vector<TokenId> Service::chat_prompt(const std::vector<ChatMessage>& messages, GenerateOptions& o,
                                          const ToolRequest& tools) const {
  return chat_prompt_tokens(chat_, tok_, messages, o, tools);
}

ToolFormat Service::tool_format() const { return chat_.calls_format(); }

std::vector<TokenId> Service::text_prompt(const std::string& text) const { return text_prompt_tokens(tok_, text); }

std::shared_ptr<Stream> Service::start(std::vector<TokenId> prompt, const GenerateOptions& o) {
  for (const auto& [id, bias] : o.sampling.logit_bias)
    if (id >= tok_.vocab_size())
      throw ApiError::bad_request("'logit_bias' names token " + std::to_string(id) + ", beyond the model's vocabulary of " +
                                      std::to_string(tok_.vocab_size()),
                                  "logit_bias");
  try {
    return scheduler_.submit({std::move(prompt), o});
  } catch (const Refused& r) {
    switch (r.why()) {
      case Refused::Why::QueueFull:
        throw ApiError(429, "rate_limit_exceeded", r.what(), {}, "queue_full");
      case Refused::Why::ShuttingDown:
        throw ApiError(503, "server_error", r.what(), {}, "shutting_down");
      case Refused::Why::TooLong:
        throw ApiError(400, "invalid_request_error", r.what(), "messages", "context_length_exceeded");
      case Refused::Why::BadRequest:
        break;
    }
    throw ApiError::bad_request(r.what());
  }
}

nlohmann::json Service::cluster_json() const {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankView& r : cluster_.ranks) {
    nlohmann::json j = {{"rank", r.rank},           {"host", r.host},         {"role", r.role},
                        {"layers", {r.layer_begin, r.layer_end}},             {"slice", r.slice},
                        {"memory_bytes", r.memory_bytes}};
    j["link_latency_us"] = r.link_latency_us >= 0 ? nlohmann::json(r.link_latency_us) : nlohmann::json();
    ranks.push_back(j);
  }
  return {{"model",
           {{"id", model_.id},
            {"architecture", model_.architecture},
            {"type", model_.type},
            {"parameters", model_.parameters},
            {"bytes", model_.bytes},
            {"context", model_.n_ctx}}},
          {"kind", cluster_.kind},
          {"backend", cluster_.backend},
          {"ranks", ranks},
          {"slots", scheduler_.slots()},
          {"active", scheduler_.active()},
          {"waiting", scheduler_.waiting()},
          {"tokens_per_second", metrics_.tokens_per_second()}};
}

}  // namespace orchard::serve
