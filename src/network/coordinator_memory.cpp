// The coordinator's memory check (protocol/memory_proof.h, docs/verification.md): a node that
// registers is sent a challenge sized to the memory it claims and gets no work until it passes.
// It commits to its fill (a Merkle root) before the fill's deadline — late, it stays without
// work until it registers again — and only then learns the probes, drawn here at random, which
// it must open within seconds. A wrong or missing opening bans it.
#include <algorithm>
#include <cstdio>

#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/http_util.h"
#include "serve/request_params.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

std::optional<MemoryDemand> memory_demand(Coordinator::State& s, const NodeInfo& info) {
  const CoordinatorOptions& o = s.opts;
  if (o.memory_proof_share <= 0) return std::nullopt;
  // The agent runs on one machine; a group's other members are its ranks' business.
  uint64_t claimed = 0;
  for (const MachineInfo& m : info.machines) claimed = std::max(claimed, m.memory_bytes);
  MemoryDemand d;
  const double share = std::min(o.memory_proof_share, 1.0) * static_cast<double>(claimed);
  const double most = static_cast<double>(uint64_t{1} << 40);  // blocks: 1 PiB, past any machine's memory
  d.blocks = static_cast<uint64_t>(std::clamp(share / protocol::kMemoryProofBlockBytes, 2.0, most));
  d.probes = std::clamp(o.memory_proof_probes, 1, 1024);
  const double gbs = std::max(o.memory_proof_min_gbs, 1e-3);
  const double fill_ms = static_cast<double>(d.blocks * protocol::kMemoryProofBlockBytes) / (gbs * 1e9) * 1000;
  d.due_ms = unix_ms() + std::max<int64_t>(0, o.memory_proof_slack_ms) + static_cast<int64_t>(std::min(fill_ms, 1e12));
  return d;
}

namespace {

template <class F>
auto read_body(const httplib::Request& req, F f) {
  try {
    return f(serve::parse_body(req.body));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError::bad_request(e.what());
  }
}

PendingMemoryCheck pending_for(Coordinator::State& s, const std::string& node_id, const std::string& seed) {
  const auto p = s.with_store([&](JobStore& st) { return st.pending_memory_check(node_id); });
  if (!p) throw ApiError(409, "invalid_request_error", "no memory check is pending for this node", {}, "no_memory_check");
  if (seed != p->challenge.seed)
    throw ApiError(409, "invalid_request_error",
                   "this answers an earlier memory check; registering again replaced it with another", "seed",
                   "stale_memory_check");
  return *p;
}

void ban_for(Coordinator::State& s, const std::string& node_id, const PendingMemoryCheck& p, const std::string& why) {
  s.with_store([&](JobStore& st) { st.record_memory_proof(node_id, p.challenge.seed, why, unix_ms()); });
  s.work.notify();  // its work moves
  std::fprintf(stderr, "coordinator: node '%s' is banned: its memory check (%llu MiB) failed: %s\n", node_id.c_str(),
               static_cast<unsigned long long>(p.challenge.bytes() >> 20), why.c_str());
  throw ApiError(403, "permission_error", "the memory check failed (" + why + "): this node gets no more work", {}, "banned");
}

// The node's root: the probes come back, drawn now that it cannot change its blocks.
void commit(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const auto body = read_body(req, [](const json& j) {
    if (!j.is_object() || !j.contains("seed") || !j["seed"].is_string()) throw Error("memory check: 'seed' is required");
    return std::pair{j["seed"].get<std::string>(), protocol::root_from_hex(j.value("root", json()), "root")};
  });
  const std::string& seed = body.first;
  const std::string& root = body.second;  // (lambdas cannot capture structured bindings in clang 14)
  const PendingMemoryCheck p = pending_for(s, a.node_id, seed);
  if (p.committed())
    throw ApiError(409, "invalid_request_error", "this memory check was committed to already", {}, "memory_check_committed");
  const int64_t now = unix_ms();
  const protocol::MemoryChallenge& c = p.challenge;
  if (now > c.due_ms) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "the memory check (%llu MiB) was committed to %.1f s after it was sent; %.1f s are allowed. This "
                  "machine could not fill the memory it claims in time: lend less (orchard node --memory) and register again",
                  static_cast<unsigned long long>(c.bytes() >> 20), static_cast<double>(now - c.issued_ms) / 1000,
                  static_cast<double>(c.due_ms - c.issued_ms) / 1000);
    throw ApiError(409, "invalid_request_error", msg, {}, "memory_check_late");
  }
  const std::vector<uint64_t> probes = protocol::draw_memory_probes(c);
  const int64_t answer_by = now + s.opts.memory_proof_answer_ms;
  if (!s.with_store([&](JobStore& st) { return st.commit_memory(a.node_id, seed, root, probes, answer_by); }))
    throw ApiError(409, "invalid_request_error", "the memory check was replaced while it was committed to", {},
                   "stale_memory_check");
  serve::send_json(res, {{"probes", protocol::probes_to_json(probes)}, {"answer_by_ms", answer_by}});
}

// The opened probes: checked against the root committed to.
void open(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const protocol::MemoryProof proof = read_body(req, [](const json& j) { return protocol::memory_proof_from_json(j); });
  const PendingMemoryCheck p = pending_for(s, a.node_id, proof.seed);
  if (!p.committed())
    throw ApiError(409, "invalid_request_error", "commit to the fill first: the probes are drawn after the root",
                   {}, "memory_check_not_committed");
  const int64_t now = unix_ms();
  if (now > p.answer_by_ms)
    ban_for(s, a.node_id, p,
            "opened its probes " + std::to_string(now - p.answer_by_ms) + " ms after the " +
                std::to_string(s.opts.memory_proof_answer_ms) + " ms allowed (blocks held in memory open in milliseconds)");
  const std::string why = protocol::check_memory_proof(p.challenge, p.root, p.probes, proof);
  if (!why.empty()) ban_for(s, a.node_id, p, why);
  if (!s.with_store([&](JobStore& st) { return st.record_memory_proof(a.node_id, proof.seed, "", now); }))
    throw ApiError(409, "invalid_request_error", "the memory check was replaced while it was answered", {}, "stale_memory_check");
  s.work.notify();  // it may take queued work now
  if (s.opts.log)
    std::fprintf(stderr, "coordinator: node '%s' proved %llu MiB of memory (%.2f s from challenge to answer)\n",
                 a.node_id.c_str(), static_cast<unsigned long long>(p.challenge.bytes() >> 20),
                 static_cast<double>(now - p.challenge.issued_ms) / 1000);
  serve::send_json(res, {{"ok", true}, {"proved_bytes", p.challenge.bytes()}});
}

}  // namespace

void add_memory_check_routes(Coordinator::State& s) {
  auto route = [&s](void (*f)(Coordinator::State&, const AuthResult&, const httplib::Request&, httplib::Response&)) {
    return node_endpoint(s, false, [&s, f](const AuthResult& a, const auto& req, auto& res) { f(s, a, req, res); });
  };
  s.http->Post(protocol::kMemoryCommitPath, route(commit));
  s.http->Post(protocol::kMemoryOpenPath, route(open));
}

}  // namespace orchard::network
