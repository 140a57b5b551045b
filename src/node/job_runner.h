#pragma once
// Turning a job the coordinator hands out into what the local engine runs: the model it asks
// for, the prompt as `orchard serve` would build it (chat template or plain text), the
// sampling the client asked for, and — when an earlier attempt streamed part of the answer —
// the tokens to continue after.
#include <memory>
#include <string>
#include <vector>

#include "model/engine.h"
#include "model/forward.h"
#include "protocol/messages.h"
#include "protocol/node_info.h"
#include "serve/chat_template.h"
#include "serve/executor.h"

namespace orchard::node {

// A model the node serves: loaded, with its chat template and its description for the
// coordinator. On one machine it runs on its own engine; on a cabled group through rank 0's
// cluster executor (node/group.h), every rank running its shard of each step.
struct ServedModel {
  std::string name;  // what jobs ask for
  std::string path;
  Engine* engine = nullptr;             // tokenizer, context, sampling (a group: rank 0's shard)
  std::unique_ptr<Engine> owned_engine;  // one machine: what `engine` points to
  serve::Executor* executor = nullptr;   // a group: the cluster's steps (slot 0); null: the local engine
  serve::ChatTemplate chat;
  protocol::ModelInfo info;

  // Generates after `tokens`, as Engine::generate_pieces does (the same sampling, stops and
  // pieces), on this machine or through the group.
  GenerateResult generate(const std::vector<TokenId>& tokens, const GenerateOptions& options, const OnPiece& on_piece);
  // A fresh sequence to feed tokens into by hand (an audit teacher-forces another node's
  // output through it), on this machine or through the group's slot 0.
  std::unique_ptr<Forward> sequence();
};

// Loads the GGUF at `path` (threads, context as `orchard serve`'s -t and -c; 0: defaults).
// The name defaults to the file's stem.
ServedModel load_served_model(const std::string& path, const std::string& name, int threads, int64_t ctx,
                              KVType kv_type = KVType::F32);
// The model as a group serves it: `engine` is rank 0's shard, `executor` its cluster executor
// (one slot); both outlive the result.
ServedModel group_served_model(const std::string& path, const std::string& name, Engine& engine,
                               serve::Executor& executor);

// The planner's description of a GGUF model (its shape and the format most weight bytes are in).
protocol::ModelInfo describe_model(const std::string& path, const std::string& name);

struct PreparedJob {
  std::vector<TokenId> tokens;   // the prompt, then every token earlier attempts streamed
  size_t prompt_tokens = 0;      // of which the prompt
  int64_t generated_before = 0;  // tokens earlier attempts generated
  int64_t next_index = 0;        // the first output chunk index this attempt writes
  GenerateOptions options;       // the client's; max_tokens is what is left of the job's
};

// Throws orchard::Error (serve::ApiError for a bad request body) when the job cannot run on
// `m`: its message is what the node reports when it fails the job.
PreparedJob prepare_job(const protocol::Work& w, const ServedModel& m);

}  // namespace orchard::node
