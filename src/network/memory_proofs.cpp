// The job store's memory checks (protocol/memory_proof.h, docs/verification.md): the
// challenge a node has yet to answer, kept in its row so that any replica can check the answer,
// and what the answer decided.
#include "network/job_store.h"
#include "protocol/secure_random.h"

namespace orchard::network {

std::optional<protocol::MemoryChallenge> JobStore::challenge_memory(const std::string& node_id, uint64_t blocks, int probes,
                                                                    int64_t now_ms, int64_t due_ms) {
  return db().write([&]() -> std::optional<protocol::MemoryChallenge> {
    sql::Stmt proven(db(), "SELECT memory_proven FROM nodes WHERE id = ?1");
    proven.bind(1, node_id);
    if (!proven.step()) throw Error(where() + ": no node '" + node_id + "' to check the memory of");
    const bool enough = static_cast<uint64_t>(proven.i64(0)) >= blocks * protocol::kMemoryProofBlockBytes;
    protocol::MemoryChallenge c;
    c.seed = protocol::random_hex(32);
    c.blocks = blocks;
    c.probes = probes;
    c.issued_ms = now_ms;
    c.due_ms = due_ms;
    sql::Stmt up(db(), std::string("UPDATE nodes SET memory_challenge = ?2, ") + kNextSeq + " WHERE id = ?1");
    up.bind(1, node_id).bind(2, enough ? std::string() : protocol::to_json(c).dump()).step();
    if (enough) return std::nullopt;
    return c;
  });
}

std::optional<protocol::MemoryChallenge> JobStore::pending_memory_challenge(const std::string& node_id) {
  sql::Stmt s(db(), "SELECT memory_challenge FROM nodes WHERE id = ?1");
  s.bind(1, node_id);
  if (!s.step() || s.text(0).empty()) return std::nullopt;
  // The store wrote it itself (challenge_memory).
  return protocol::memory_challenge_from_json(nlohmann::json::parse(s.text(0)));
}

bool JobStore::record_memory_proof(const std::string& node_id, const std::string& seed, const std::string& why,
                                   int64_t now_ms) {
  return db().write([&] {
    sql::Stmt s(db(), "SELECT memory_challenge FROM nodes WHERE id = ?1");
    s.bind(1, node_id);
    if (!s.step() || s.text(0).empty()) return false;
    const protocol::MemoryChallenge c = protocol::memory_challenge_from_json(nlohmann::json::parse(s.text(0)));
    if (c.seed != seed) return false;
    if (!why.empty()) {
      ban_in(node_id, "memory check: " + why, now_ms);
      return true;
    }
    sql::Stmt up(db(), std::string("UPDATE nodes SET memory_challenge = '', memory_proven = ?2, ") + kNextSeq + " WHERE id = ?1");
    up.bind(1, node_id).bind(2, static_cast<int64_t>(c.bytes())).step();
    return true;
  });
}

}  // namespace orchard::network
