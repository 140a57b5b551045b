#include "node/coordinator_client.h"

#include <httplib.h>

#include "platform/wall_clock.h"
#include "protocol/request_signing.h"

namespace orchard::node {

using nlohmann::json;

CoordinatorClient::CoordinatorClient(const std::string& url, const protocol::NodeIdentity& identity, std::string ca_cert)
    : url_(url), identity_(identity), ca_cert_(std::move(ca_cert)) {
  const size_t scheme = url.find("://");
  const std::string rest = scheme == std::string::npos ? "" : url.substr(scheme + 3);
  if ((url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) || rest.empty() ||
      rest.find('/') != std::string::npos)
    throw Error("coordinator '" + url + "': expected http://HOST:PORT (no path)");
}

json CoordinatorClient::call(const std::string& method, const std::string& path, const json& body, int timeout_s) const {
  const std::string text = body.is_null() ? std::string() : body.dump();
  const protocol::Headers signed_headers = protocol::sign_request(identity_, method, path, text, platform::unix_time_ms());
  httplib::Headers headers(signed_headers.begin(), signed_headers.end());
  httplib::Client c(url_);
  if (!ca_cert_.empty()) c.set_ca_cert_path(ca_cert_.c_str());
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(timeout_s, 0);
  c.set_write_timeout(30, 0);
  const std::string where = method + " " + url_ + path;
  httplib::Result r = method == "GET" ? c.Get(path, headers) : c.Post(path, headers, text, "application/json");
  if (!r && r.error() == httplib::Error::SSLServerVerification)
    throw CallError(where + ": the coordinator's TLS certificate is not trusted" +
                        (ca_cert_.empty() ? std::string(" (give it, or its CA, with --ca-cert)") : " by " + ca_cert_),
                    0, "tls");
  if (!r) throw CallError(where + ": no answer (" + httplib::to_string(r.error()) + ")", 0, {});
  if (r->status == 204) return nullptr;
  const json reply = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    std::string msg = r->body, code;
    if (reply.is_object() && reply.contains("error") && reply["error"].is_object()) {
      msg = reply["error"].value("message", msg);
      if (reply["error"].contains("code") && reply["error"]["code"].is_string()) code = reply["error"]["code"];
    }
    throw CallError(where + ": HTTP " + std::to_string(r->status) + ": " + msg, r->status, code);
  }
  if (reply.is_discarded()) throw CallError(where + ": the reply is not JSON", r->status, {});
  return reply;
}

protocol::RegisterReply CoordinatorClient::register_node(const protocol::NodeInfo& info) const {
  return protocol::register_reply_from_json(call("POST", protocol::kRegisterPath, protocol::to_json(info)));
}

std::vector<uint64_t> CoordinatorClient::commit_memory(const std::string& seed, const std::string& root) const {
  const json reply = call("POST", protocol::kMemoryCommitPath, {{"seed", seed}, {"root", protocol::root_hex(root)}});
  try {
    return protocol::probes_from_json(reply.is_object() ? reply.value("probes", json()) : json());
  } catch (const Error& e) {
    throw CallError(std::string("the coordinator's memory check reply: ") + e.what(), 200, "bad_reply");
  }
}

void CoordinatorClient::open_memory(const protocol::MemoryProof& proof) const {
  call("POST", protocol::kMemoryOpenPath, protocol::to_json(proof), 120);
}

void CoordinatorClient::heartbeat(const protocol::HeartbeatState& state) const {
  call("POST", protocol::kHeartbeatPath, protocol::to_json(state));
}

std::optional<protocol::Work> CoordinatorClient::poll(int wait_s) const {
  const json reply = call("POST", protocol::kWorkPath, {{"wait", wait_s}}, wait_s + 30);
  if (reply.is_null()) return std::nullopt;
  return protocol::work_from_json(reply);
}

void CoordinatorClient::append(const std::string& job, int64_t attempt,
                               const std::vector<protocol::OutputChunk>& chunks) const {
  json list = json::array();
  for (const auto& c : chunks) list.push_back(protocol::to_json(c));
  call("POST", protocol::job_path(job, "output"), {{"attempt", attempt}, {"chunks", list}});
}

json CoordinatorClient::complete(const std::string& job, int64_t attempt, int64_t prompt_tokens,
                                 int64_t completion_tokens, const std::string& finish_reason) const {
  return call("POST", protocol::job_path(job, "complete"),
              {{"attempt", attempt},
               {"prompt_tokens", prompt_tokens},
               {"completion_tokens", completion_tokens},
               {"finish_reason", finish_reason}});
}

void CoordinatorClient::fail(const std::string& job, int64_t attempt, const std::string& error) const {
  call("POST", protocol::job_path(job, "fail"), {{"attempt", attempt}, {"error", error}});
}

void CoordinatorClient::hand_back(const std::string& job, int64_t attempt) const {
  call("POST", protocol::job_path(job, "hand-back"), {{"attempt", attempt}});
}

json CoordinatorClient::status() const { return call("GET", protocol::kNodeStatusPath); }

}  // namespace orchard::node
