#pragma once
// The one core every API adapter (OpenAI, Ollama, Anthropic, the web page) talks to: turns
// chat messages or text into prompt tokens, starts generations on the scheduler, and says
// what model and cluster are serving.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/chat_template.h"
#include "serve/tool_calls.h"
#include "serve/scheduler.h"

namespace orchard::serve {

struct ModelInfo {
  std::string id;            // the name clients use ("stories260K", "owner/repo/file")
  std::string path;
  std::string architecture;
  std::string type;          // weight format ("Q4_0", mixed → the most common)
  int64_t parameters = 0;
  uint64_t bytes = 0;        // weights
  int64_t n_ctx = 0;         // positions per slot
  int64_t created = 0;       // unix seconds (the file's modification time)
};

// One rank as the web page's cluster panel shows it.
struct RankView {
  int rank = 0;
  std::string host;
  std::string role;          // "whole model", "stage 1 of 2", "stage 1, slice 2 of 2"
  int64_t layer_begin = 0, layer_end = 0;
  std::string slice;         // tensor-parallel share ("heads 0-15, ffn 0-5503, vocab 0-15999")
  uint64_t memory_bytes = 0; // weights it holds plus its caches
  double link_latency_us = -1;  // measured to rank 0 (< 0: not measured / rank 0 itself)
};

struct ClusterView {
  std::string kind = "single";   // single, pipeline, tensor, hybrid
  std::string backend;           // tcp, shm, mpi, rdma ("" on one machine)
  std::vector<RankView> ranks;
};

// A conversation's prompt as `chat` renders it, tokenized with its turn markers as special
// tokens and BOS once; adds the template's end-of-turn markers to `o.stop`. A conversation the
// template refuses, or one that renders to nothing, is a 400.
// With tools offered (and not declined: tool_choice none), they are rendered as the template
// writes them (ChatTemplate::render), and a choice that forces a call sets o.grammar to one
// well-formed call.
std::vector<TokenId> chat_prompt_tokens(const ChatTemplate& chat, const Tokenizer& tok,
                                        const std::vector<ChatMessage>& messages, GenerateOptions& o,
                                        const ToolRequest& tools = {});
// A completion prompt: BOS as the vocabulary asks, no special-token parsing; empty is a 400.
std::vector<TokenId> text_prompt_tokens(const Tokenizer& tok, const std::string& text);

class Service {
 public:
  Service(Scheduler& scheduler, const Tokenizer& tok, ChatTemplate chat, Metrics& metrics, ModelInfo model,
          ClusterView cluster, GenerateOptions defaults = {});

  // The chat template's prompt; adds its end-of-turn markers to `o.stop`.
  std::vector<TokenId> chat_prompt(const std::vector<ChatMessage>& messages, GenerateOptions& o,
                                   const ToolRequest& tools = {}) const;
  // How the model writes tool calls (from its chat template).
  ToolFormat tool_format() const;
  std::vector<TokenId> text_prompt(const std::string& text) const;
  // Queues a generation; refusals become ApiErrors (429 queue full, 503 stopping, 400 too long).
  std::shared_ptr<Stream> start(std::vector<TokenId> prompt, const GenerateOptions& o);

  const GenerateOptions& defaults() const { return defaults_; }
  const ModelInfo& model() const { return model_; }
  const ChatTemplate& chat_template() const { return chat_; }
  Metrics& metrics() { return metrics_; }
  Scheduler& scheduler() { return scheduler_; }
  // What /api/cluster returns: the plan, every rank, slots and tokens/s now.
  nlohmann::json cluster_json() const;

 private:
  Scheduler& scheduler_;
  const Tokenizer& tok_;
  ChatTemplate chat_;
  Metrics& metrics_;
  ModelInfo model_;
  ClusterView cluster_;
  GenerateOptions defaults_;
};

}  // namespace orchard::serve
