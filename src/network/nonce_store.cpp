#include "network/nonce_store.h"

#include "tensor/error.h"

namespace orchard::network {

// ---- in memory ----

bool MemoryNonceStore::remember(const std::string& node_id, const std::string& nonce, int64_t expires_at_ms,
                                int64_t now_ms) {
  std::lock_guard lock(mu_);
  prune(now_ms);
  // '\n' cannot occur in a node id, so no two pairs share a key.
  auto [it, fresh] = expiry_.emplace(node_id + '\n' + nonce, expires_at_ms);
  if (!fresh) return false;
  by_expiry_.emplace(expires_at_ms, it->first);
  return true;
}

size_t MemoryNonceStore::size() const {
  std::lock_guard lock(mu_);
  return expiry_.size();
}

void MemoryNonceStore::prune(int64_t now_ms) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first < now_ms) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

// ---- in a database ----

namespace {

constexpr const char* kNoncesSchema = R"sql(
CREATE TABLE IF NOT EXISTS node_nonces(
  node TEXT NOT NULL,
  nonce TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY(node, nonce)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS node_nonces_expiry ON node_nonces(expires_at);
)sql";

constexpr sql::FileKind kNoncesKind{"replay guard", "orchard-nonces", "1", kNoncesSchema};

}  // namespace

std::unique_ptr<DatabaseNonceStore> DatabaseNonceStore::open(const std::string& location) {
  return std::unique_ptr<DatabaseNonceStore>(new DatabaseNonceStore(sql::open_database(location, kNoncesKind)));
}

bool DatabaseNonceStore::remember(const std::string& node_id, const std::string& nonce, int64_t expires_at_ms,
                                  int64_t now_ms) {
  std::lock_guard lock(mu_);
  sql::Connection& db = *db_;
  // Each statement on its own (a database a network away pays a round trip for each, and every
  // signed request comes here), and expired rows only once a second. A row can expire only once
  // its request's timestamp is outside the clock window, which refuses that pair before it is
  // looked up here, so dropping it in a statement apart from the insert admits nothing.
  if (now_ms - last_prune_ms_ >= 1000 || now_ms < last_prune_ms_) {
    sql::Stmt prune(db, "DELETE FROM node_nonces WHERE expires_at < ?1");
    prune.bind(1, now_ms).step();
    last_prune_ms_ = now_ms;
  }
  // An expired row not pruned yet counts as absent: the pair is new again.
  sql::Stmt ins(db,
                "INSERT INTO node_nonces(node, nonce, expires_at) VALUES(?1, ?2, ?3) ON CONFLICT(node, nonce) "
                "DO UPDATE SET expires_at = excluded.expires_at WHERE node_nonces.expires_at < ?4");
  ins.bind(1, node_id).bind(2, nonce).bind(3, expires_at_ms).bind(4, now_ms);
  return ins.changes() == 1;
}

int64_t DatabaseNonceStore::size() {
  std::lock_guard lock(mu_);
  sql::Stmt s(*db_, "SELECT count(*) FROM node_nonces");
  s.step();
  return s.i64(0);
}

}  // namespace orchard::network
