#include "network/api_keys.h"

#include "network/protocol_names.h"
#include "platform/wall_clock.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr size_t kKeyRandomBytes = 32;

constexpr const char* kApiKeysSchema = R"sql(
CREATE TABLE IF NOT EXISTS api_keys(
  key_hash TEXT PRIMARY KEY,
  account TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys(account);
)sql";

constexpr sql::FileKind kApiKeysKind{"API key store", "orchard-api-keys", "1", kApiKeysSchema};

}  // namespace

std::optional<std::string> api_key_hash(std::string_view key) {
  if (key.size() != kApiKeyPrefix.size() + 2 * kKeyRandomBytes || key.substr(0, kApiKeyPrefix.size()) != kApiKeyPrefix)
    return std::nullopt;
  for (char c : key.substr(kApiKeyPrefix.size()))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return sha256_hex(std::string(key));
}

ApiKeys ApiKeys::open(const std::string& location) {
  return ApiKeys(sql::open_database(location, kApiKeysKind));
}

std::string ApiKeys::create(const std::string& account) {
  if (account.empty()) throw Error("creating an API key: the account name is empty");
  const std::string key = std::string(kApiKeyPrefix) + random_hex(kKeyRandomBytes);
  // A collision of 256 random bits would be a broken generator; the PRIMARY KEY makes it an
  // error rather than two accounts sharing a key.
  sql::Stmt ins(*db_, "INSERT INTO api_keys(key_hash, account, created_at) VALUES(?1, ?2, ?3)");
  ins.bind(1, *api_key_hash(key)).bind(2, account).bind(3, platform::unix_time_ms()).step();
  return key;
}

std::optional<std::string> ApiKeys::account_for(std::string_view key) {
  const auto hash = api_key_hash(key);
  if (!hash) return std::nullopt;
  sql::Stmt s(*db_, "SELECT account FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL");
  s.bind(1, *hash);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

bool ApiKeys::revoke(std::string_view key) {
  const auto hash = api_key_hash(key);
  if (!hash) return false;
  sql::Stmt s(*db_, "UPDATE api_keys SET revoked_at = ?2 WHERE key_hash = ?1 AND revoked_at IS NULL");
  return s.bind(1, *hash).bind(2, platform::unix_time_ms()).changes() == 1;
}

std::string api_key_id(std::string_view key_hash) { return "key-" + std::string(key_hash.substr(0, 16)); }

std::vector<ApiKeys::Listed> ApiKeys::list(const std::string& account) {
  sql::Stmt s(*db_,
              "SELECT key_hash, account, created_at, revoked_at FROM api_keys WHERE ?1 = '' OR account = ?1 "
              "ORDER BY created_at, key_hash");
  s.bind(1, account);
  std::vector<Listed> out;
  while (s.step()) {
    Listed k{api_key_id(s.text(0)), s.text(1), s.i64(2), std::nullopt};
    if (!s.null(3)) k.revoked_at = s.i64(3);
    out.push_back(std::move(k));
  }
  return out;
}

std::optional<std::string> ApiKeys::revoke_id(std::string_view id) {
  const std::string_view prefix = "key-";
  bool ok = id.size() == prefix.size() + 16 && id.substr(0, prefix.size()) == prefix;
  for (char c : id.substr(std::min(id.size(), prefix.size())))
    ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!ok) throw Error("'" + std::string(id) + "' is not an API key id (key- and 16 hex digits, from `api-key list`)");
  return db_->write([&]() -> std::optional<std::string> {
    // The id is a prefix of the hash: the range [prefix, prefix + 'g') holds exactly the hashes
    // that start with it (hex digits sort below 'g').
    const std::string lo(id.substr(prefix.size())), hi = lo + "g";
    sql::Stmt s(*db_, "SELECT key_hash, account FROM api_keys WHERE key_hash >= ?1 AND key_hash < ?2 AND revoked_at IS NULL");
    s.bind(1, lo).bind(2, hi);
    if (!s.step()) return std::nullopt;
    const std::string hash = s.text(0), account = s.text(1);
    sql::Stmt up(*db_, "UPDATE api_keys SET revoked_at = ?2 WHERE key_hash = ?1 AND revoked_at IS NULL");
    up.bind(1, hash).bind(2, platform::unix_time_ms()).step();
    return account;
  });
}

}  // namespace orchard::network
