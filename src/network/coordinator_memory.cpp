// The coordinator's memory check (protocol/memory_proof.h, docs/verification.md): a node that
// registers is sent a challenge sized to the memory it claims and gets no work until it
// answers; a wrong answer bans it, a late one leaves it without work until it registers again.
#include <algorithm>
#include <cstdio>

#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/http_util.h"
#include "serve/request_params.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

std::optional<protocol::MemoryChallenge> challenge_memory(Coordinator::State& s, const NodeInfo& info) {
  const CoordinatorOptions& o = s.opts;
  if (o.memory_proof_share <= 0) return std::nullopt;
  // The agent runs on one machine; a group's other members are its ranks' business.
  uint64_t claimed = 0;
  for (const MachineInfo& m : info.machines) claimed = std::max(claimed, m.memory_bytes);
  const uint64_t blocks = std::max<uint64_t>(2, static_cast<uint64_t>(o.memory_proof_share * static_cast<double>(claimed)) /
                                                    protocol::kMemoryProofBlockBytes);
  const double bytes = static_cast<double>(blocks * protocol::kMemoryProofBlockBytes);
  const int64_t now = unix_ms();
  const int64_t due = now + o.memory_proof_slack_ms + static_cast<int64_t>(bytes / (o.memory_proof_min_gbs * 1e9) * 1000);
  const auto c = s.with_store([&](JobStore& st) { return st.challenge_memory(info.id, blocks, o.memory_proof_probes, now, due); });
  if (c && o.log)
    std::fprintf(stderr, "coordinator: node '%s' is asked to prove %.0f MiB of memory within %.1f s\n", info.id.c_str(),
                 bytes / 1048576, static_cast<double>(due - now) / 1000);
  return c;
}

namespace {

void memory_proof(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  protocol::MemoryProof p;
  try {
    p = protocol::memory_proof_from_json(serve::parse_body(req.body));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError::bad_request(e.what());
  }
  const auto c = s.with_store([&](JobStore& st) { return st.pending_memory_challenge(a.node_id); });
  if (!c) throw ApiError(409, "invalid_request_error", "no memory check is pending for this node", {}, "no_memory_check");
  if (p.seed != c->seed)
    throw ApiError(409, "invalid_request_error",
                   "this answers an earlier memory check; registering again replaced it with another", "seed",
                   "stale_memory_check");
  const int64_t now = unix_ms();
  const double mib = static_cast<double>(c->bytes()) / 1048576;
  if (now > c->due_ms) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "the memory check (%.0f MiB) was answered %.1f s after it was sent; %.1f s are allowed. This machine "
                  "could not fill the memory it claims in time: lend less (orchard node --memory) and register again",
                  mib, static_cast<double>(now - c->issued_ms) / 1000, static_cast<double>(c->due_ms - c->issued_ms) / 1000);
    throw ApiError(409, "invalid_request_error", msg, {}, "memory_check_late");
  }
  const std::string why = protocol::check_memory_proof(*c, p);
  const bool recorded = s.with_store([&](JobStore& st) { return st.record_memory_proof(a.node_id, c->seed, why, now); });
  if (!recorded)
    throw ApiError(409, "invalid_request_error", "the memory check was replaced while it was answered", {}, "stale_memory_check");
  s.work.notify();  // proved: it may take queued work; banned: its work moves
  if (!why.empty()) {
    std::fprintf(stderr, "coordinator: node '%s' is banned: its memory check (%.0f MiB) failed: %s\n", a.node_id.c_str(), mib,
                 why.c_str());
    throw ApiError(403, "permission_error", "the memory check failed (" + why + "): this node gets no more work", {},
                   "banned");
  }
  if (s.opts.log)
    std::fprintf(stderr, "coordinator: node '%s' proved %.0f MiB of memory (filled in %.2f s by its count, %.2f s by ours)\n",
                 a.node_id.c_str(), mib, p.fill_s, static_cast<double>(now - c->issued_ms) / 1000);
  serve::send_json(res, {{"ok", true}, {"proved_bytes", c->bytes()}});
}

}  // namespace

void add_memory_proof_route(Coordinator::State& s) {
  s.http->Post(protocol::kMemoryProofPath,
               node_endpoint(s, false, [&s](const AuthResult& a, const auto& req, auto& res) { memory_proof(s, a, req, res); }));
}

}  // namespace orchard::network
