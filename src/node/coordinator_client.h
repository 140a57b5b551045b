#pragma once
// A node's side of the protocol (docs/network-protocol.md): every call signed with the node's
// key, its reply parsed, its refusal an error that carries the status.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "protocol/node_identity.h"
#include "protocol/node_info.h"
#include "protocol/messages.h"
#include "tensor/error.h"

namespace orchard::node {

// A call that failed: `status` is the HTTP status (0: no answer at all), `code` the error
// object's code ("not_your_job", "unknown_node", …).
// status 0: no HTTP answer (code "tls": the coordinator's certificate was not trusted, which
// retrying does not change).
class CallError : public Error {
 public:
  CallError(const std::string& what, int status, std::string code) : Error(what), status(status), code(std::move(code)) {}
  int status;
  std::string code;
};

class CoordinatorClient {
 public:
  // `url`: http://host:port (https too); throws orchard::Error for anything else. `ca_cert`: a
  // PEM file with the coordinator's certificate or its CA, the only ones an https coordinator
  // is then trusted by (empty: the system's CAs).
  CoordinatorClient(const std::string& url, const protocol::NodeIdentity& identity, std::string ca_cert = {});

  // One signed request; the reply's JSON (null for 204). Throws CallError. Thread-safe: each
  // call has its own connection.
  nlohmann::json call(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr,
                      int timeout_s = 30) const;

  protocol::RegisterReply register_node(const protocol::NodeInfo& info) const;
  void heartbeat(const protocol::HeartbeatState& state) const;
  std::optional<protocol::Work> poll(int wait_s) const;
  void append(const std::string& job, int64_t attempt, const std::vector<protocol::OutputChunk>& chunks) const;
  nlohmann::json complete(const std::string& job, int64_t attempt, int64_t prompt_tokens, int64_t completion_tokens,
                          const std::string& finish_reason) const;
  void fail(const std::string& job, int64_t attempt, const std::string& error) const;
  void hand_back(const std::string& job, int64_t attempt) const;
  nlohmann::json status() const;
  // The memory check (protocol/memory_proof.h): commits to a fill's root and gets the probes
  // back; then opens them.
  std::vector<uint64_t> commit_memory(const std::string& seed, const std::string& root) const;
  void open_memory(const protocol::MemoryProof& proof) const;

  const std::string& url() const { return url_; }

 private:
  std::string url_;
  const protocol::NodeIdentity& identity_;
  std::string ca_cert_;
};

}  // namespace orchard::node
