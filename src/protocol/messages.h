#pragma once
// The messages between node agents and the coordinator (docs/network-protocol.md): the
// endpoints' paths and the JSON of the bodies both sides build and read, kept in one place so
// the two cannot drift apart.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "protocol/memory_proof.h"


namespace orchard::protocol {

inline constexpr const char* kRegisterPath = "/v1/node/register";
inline constexpr const char* kHeartbeatPath = "/v1/node/heartbeat";
inline constexpr const char* kWorkPath = "/v1/node/work";
inline constexpr const char* kNodeStatusPath = "/v1/node/status";
inline constexpr const char* kMemoryCommitPath = "/v1/node/memory-check/commit";
inline constexpr const char* kMemoryOpenPath = "/v1/node/memory-check/open";
inline constexpr int kMaxPollWaitS = 30;

// "/v1/node/jobs/<job>/<action>", action one of "output", "complete", "fail", "hand-back".
std::string job_path(const std::string& job_id, const std::string& action);

// What a node is given to run.
struct Work {
  std::string job_id;
  int64_t attempt = 0;
  std::string model;
  nlohmann::json request;
  int64_t n_ctx = 0, max_tokens = 0;
  std::vector<std::string> output;  // chunks earlier attempts streamed: continue after them
  std::vector<std::vector<int32_t>> output_tokens;  // each chunk's token ids (empty if not sent)
  int64_t lease_deadline_ms = 0;
  std::string plan;                 // the split placement predicted ("pipeline 2", …)
};

// One piece of a job's output: the text a client may see and the tokens it holds.
struct OutputChunk {
  int64_t index = 0;
  std::string text;
  std::vector<int32_t> tokens;
};

// What the job store's `request` holds: which API the client called and its body.
inline constexpr const char* kChatApi = "chat";
inline constexpr const char* kCompletionsApi = "completions";

struct RegisterReply {
  std::string node_id;
  int64_t lease_ms = 0, heartbeat_timeout_ms = 0, heartbeat_interval_ms = 0;
  // The memory check to pass before the node gets work (kMemoryCommitPath, then kMemoryOpenPath).
  std::optional<MemoryChallenge> memory_challenge;
};

// Each *_from_json throws orchard::Error naming the message and the field that is wrong.
nlohmann::json to_json(const OutputChunk& c);
OutputChunk chunk_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Work& w);
Work work_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RegisterReply& r);
RegisterReply register_reply_from_json(const nlohmann::json& j);

}  // namespace orchard::protocol
