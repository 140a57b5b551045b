#pragma once
// The replay guard: remembers each (node, nonce) of an accepted request until the request's
// timestamp has left the skew window, after which the timestamp check refuses it anyway. Only
// that window needs remembering, so the store stays as small as the traffic of one window.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "network/database.h"
#include "network/protocol_names.h"

namespace orchard::network {

// One process's guard. Thread-safe.
class MemoryNonceStore : public NonceStore {
 public:
  bool remember(const std::string& node_id, const std::string& nonce, int64_t expires_at_ms, int64_t now_ms) override;
  size_t size() const;

 private:
  void prune(int64_t now_ms);
  mutable std::mutex mu_;
  std::unordered_map<std::string, int64_t> expiry_;  // node '\n' nonce → expires_at_ms
  std::multimap<int64_t, std::string> by_expiry_;    // to drop expired entries oldest first
};

// A guard shared by every coordinator replica that opens the same database (an SQLite file of
// kind `orchard-nonces`, or PostgreSQL): the primary key makes exactly one of two concurrent
// inserts of a pair succeed, across connections and processes.
class DatabaseNonceStore : public NonceStore {
 public:
  // Opens (creating when absent or empty) the replay guard at `location`: an SQLite file's path
  // or a PostgreSQL URL. Throws orchard::Error naming it when it cannot be opened or holds
  // something else.
  static std::unique_ptr<DatabaseNonceStore> open(const std::string& location);
  bool remember(const std::string& node_id, const std::string& nonce, int64_t expires_at_ms, int64_t now_ms) override;
  // Unexpired and not yet pruned entries (tests).
  int64_t size();

 private:
  explicit DatabaseNonceStore(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}
  std::unique_ptr<sql::Connection> db_;
  std::mutex mu_;  // one connection: keeps a remember's statements together
  int64_t last_prune_ms_ = 0;
};

}  // namespace orchard::network
