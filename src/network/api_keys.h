#pragma once
// Client API keys: how a client that submits jobs says which account pays for them.
//
// A key is "ok-" + 64 hex digits (32 bytes from OpenSSL's CSPRNG), shown to the client once at
// creation. The database keeps only its SHA-256, so a copy of the file (a backup, a leaked
// replica) cannot be used to submit jobs. A plain hash suffices, with no salt or slow KDF,
// because the key is 256 random bits: there is no dictionary to try. Lookup goes by the hash;
// whatever timing the index comparison leaks is about the hash, which tells nothing about the key.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "network/database.h"

namespace orchard::network {

inline constexpr std::string_view kApiKeyPrefix = "ok-";

class ApiKeys {
 public:
  // Opens (creating when absent or empty) the API key store at `location` (an SQLite file's
  // path or a PostgreSQL URL), which several coordinator replicas may share. Throws
  // orchard::Error naming it when it cannot be opened or holds something else (a ledger, …).
  static ApiKeys open(const std::string& location);

  // A fresh key for `account` (throws orchard::Error for an empty account name).
  std::string create(const std::string& account);
  // The account a live key belongs to; nullopt for an unknown, revoked or malformed key.
  // Throws only when the database fails.
  std::optional<std::string> account_for(std::string_view key);
  // Revokes `key`; true when it was live. A revoked key stays recorded (who held it, when it
  // was revoked) and never works again.
  bool revoke(std::string_view key);

  // What an operator sees of the keys without holding them: each key's id (api_key_id), account
  // and times, oldest first; `account` empty: every account's.
  struct Listed {
    std::string id, account;
    int64_t created_at = 0;                // Unix ms
    std::optional<int64_t> revoked_at;     // Unix ms; none while the key works
  };
  std::vector<Listed> list(const std::string& account = {});
  // Revokes the key whose id is `id` (api_key_id) and returns its account; nullopt when no key
  // has that id or it was revoked already. Throws orchard::Error for a malformed id.
  std::optional<std::string> revoke_id(std::string_view id);

 private:
  explicit ApiKeys(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}
  std::unique_ptr<sql::Connection> db_;
};

// The stored form of a key: SHA-256 hex of its full text; nullopt when `key` is not
// "ok-" + 64 lowercase hex digits.
std::optional<std::string> api_key_hash(std::string_view key);
// A key's public name: "key-" + the first 16 hex digits of its hash (64 bits, so ids do not
// collide among the keys one coordinator makes), printed at creation and by `api-key list`, and
// enough to revoke it. It reveals nothing of the key.
std::string api_key_id(std::string_view key_hash);

}  // namespace orchard::network
