// The job store's memory checks (protocol/memory_proof.h, docs/verification.md): the check a
// node has yet to finish, kept in its row so that any replica can take its next step, and what
// its answer decided.
#include "network/job_store.h"
#include "protocol/secure_random.h"

namespace orchard::network {

namespace {

nlohmann::json stored(const PendingMemoryCheck& p) {
  nlohmann::json j = protocol::to_json(p.challenge);
  if (p.committed()) {
    j["root"] = protocol::root_hex(p.root);
    j["probed"] = protocol::probes_to_json(p.probes);
    j["answer_by_ms"] = p.answer_by_ms;
  }
  return j;
}

}  // namespace

std::optional<protocol::MemoryChallenge> JobStore::challenge_memory_in(const std::string& node_id, const MemoryDemand& d,
                                                                       int64_t now_ms) {
  sql::Stmt proven(db(), "SELECT memory_proven FROM nodes WHERE id = ?1");
  proven.bind(1, node_id);
  if (!proven.step()) throw Error(where() + ": no node '" + node_id + "' to check the memory of");
  const bool enough = static_cast<uint64_t>(proven.i64(0)) >= d.blocks * protocol::kMemoryProofBlockBytes;
  PendingMemoryCheck p;
  p.challenge.seed = protocol::random_hex(32);
  p.challenge.blocks = d.blocks;
  p.challenge.probes = d.probes;
  p.challenge.issued_ms = now_ms;
  p.challenge.due_ms = d.due_ms;
  sql::Stmt up(db(), std::string("UPDATE nodes SET memory_challenge = ?2, ") + kNextSeq + " WHERE id = ?1");
  up.bind(1, node_id).bind(2, enough ? std::string() : stored(p).dump()).step();
  if (enough) return std::nullopt;
  return p.challenge;
}

std::optional<PendingMemoryCheck> JobStore::pending_memory_check_in(const std::string& node_id) {
  sql::Stmt s(db(), "SELECT memory_challenge FROM nodes WHERE id = ?1");
  s.bind(1, node_id);
  if (!s.step() || s.text(0).empty()) return std::nullopt;
  // The store wrote it itself (challenge_memory_in, commit_memory).
  const nlohmann::json j = nlohmann::json::parse(s.text(0));
  PendingMemoryCheck p;
  p.challenge = protocol::memory_challenge_from_json(j);
  if (j.contains("root")) {
    p.root = protocol::root_from_hex(j["root"], "root");
    p.probes = protocol::probes_from_json(j["probed"]);
    p.answer_by_ms = j["answer_by_ms"].get<int64_t>();
  }
  return p;
}

std::optional<PendingMemoryCheck> JobStore::pending_memory_check(const std::string& node_id) {
  return db().read([&] { return pending_memory_check_in(node_id); });
}

bool JobStore::commit_memory(const std::string& node_id, const std::string& seed, const std::string& root,
                             const std::vector<uint64_t>& probes, int64_t answer_by_ms) {
  return db().write([&] {
    auto p = pending_memory_check_in(node_id);
    if (!p || p->challenge.seed != seed || p->committed()) return false;
    p->root = root;
    p->probes = probes;
    p->answer_by_ms = answer_by_ms;
    sql::Stmt up(db(), "UPDATE nodes SET memory_challenge = ?2 WHERE id = ?1");
    up.bind(1, node_id).bind(2, stored(*p).dump()).step();
    return true;
  });
}

bool JobStore::record_memory_proof(const std::string& node_id, const std::string& seed, const std::string& why,
                                   int64_t now_ms) {
  return db().write([&] {
    const auto p = pending_memory_check_in(node_id);
    if (!p || p->challenge.seed != seed) return false;
    if (!why.empty()) {
      ban_in(node_id, "memory check: " + why, now_ms);
      return true;
    }
    sql::Stmt up(db(), std::string("UPDATE nodes SET memory_challenge = '', memory_proven = ?2, ") + kNextSeq + " WHERE id = ?1");
    up.bind(1, node_id).bind(2, static_cast<int64_t>(p->challenge.bytes())).step();
    return true;
  });
}

}  // namespace orchard::network
