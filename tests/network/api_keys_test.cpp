// Client API keys: created fresh, looked up, revoked; unknown and malformed keys refused; only
// the hash ever stored.
#include "network/api_keys.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "network/protocol_names.h"
#include "network/nonce_store.h"
#include "network/test_files.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

namespace fs = std::filesystem;

TEST(ApiKeys, CreateLookupRevoke) {
  auto keys = ApiKeys::open(test::fresh_dir("keys-basic") / "coordinator.sqlite");
  const std::string k1 = keys.create("alice");
  const std::string k2 = keys.create("alice");
  const std::string k3 = keys.create("bob");
  EXPECT_EQ(k1.size(), 67u);
  EXPECT_EQ(k1.rfind("ok-", 0), 0u);
  EXPECT_NE(k1, k2);
  EXPECT_EQ(keys.account_for(k1), "alice");
  EXPECT_EQ(keys.account_for(k2), "alice");
  EXPECT_EQ(keys.account_for(k3), "bob");
  EXPECT_TRUE(keys.revoke(k1));
  EXPECT_EQ(keys.account_for(k1), std::nullopt);
  EXPECT_FALSE(keys.revoke(k1));  // already revoked
  EXPECT_EQ(keys.account_for(k2), "alice");  // the account's other key still works
  EXPECT_THROW(keys.create(""), Error);
}

// An operator lists keys by id (never the keys) and revokes one by its id.
TEST(ApiKeys, ListedByIdAndRevokedById) {
  auto keys = ApiKeys::open(test::fresh_dir("keys-by-id") / "coordinator.sqlite");
  const std::string a = keys.create("alice"), b = keys.create("bob"), a2 = keys.create("alice");
  const auto all = keys.list();
  ASSERT_EQ(all.size(), 3u);
  const std::string id_a = api_key_id(*api_key_hash(a));
  EXPECT_EQ(id_a.size(), 4u + 16u);
  EXPECT_EQ(id_a.rfind("key-", 0), 0u);
  for (const auto& k : all) {
    EXPECT_EQ(a.find(k.id.substr(4)), std::string::npos) << "an id must not be part of a key";
    EXPECT_FALSE(k.revoked_at);
  }
  EXPECT_EQ(keys.list("alice").size(), 2u);
  EXPECT_EQ(keys.list("bob").at(0).id, api_key_id(*api_key_hash(b)));

  EXPECT_EQ(keys.revoke_id(id_a), "alice");
  EXPECT_FALSE(keys.account_for(a)) << "a revoked key works no more";
  EXPECT_EQ(keys.account_for(a2), "alice") << "the account's other key still works";
  EXPECT_EQ(keys.account_for(b), "bob");
  EXPECT_FALSE(keys.revoke_id(id_a)) << "revoked already";
  EXPECT_FALSE(keys.revoke_id("key-0000000000000000"));
  for (const char* bad : {"key-", "key-12", "0123456789abcdef", "key-0123456789ABCDEF", "key-0123456789abcdeg"})
    EXPECT_THROW(keys.revoke_id(bad), Error) << bad;
  int revoked = 0;
  for (const auto& k : keys.list()) revoked += k.revoked_at.has_value();
  EXPECT_EQ(revoked, 1);
}

TEST(ApiKeys, UnknownAndMalformedKeysAreRefused) {
  auto keys = ApiKeys::open(test::fresh_dir("keys-unknown") / "coordinator.sqlite");
  const std::string real = keys.create("alice");
  EXPECT_EQ(keys.account_for("ok-" + std::string(64, '0')), std::nullopt);
  std::string upper = real;
  for (size_t i = 3; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  ASSERT_NE(upper, real);
  EXPECT_EQ(keys.account_for(upper), std::nullopt);
  for (const std::string& bad : {std::string(), std::string("ok-"), real.substr(0, 66), real + "0", "xx" + real.substr(2),
                                 real.substr(3), std::string("' OR 1=1 --"), std::string(1 << 20, 'a'),
                                 std::string("ok-\0", 4) + std::string(63, '0')}) {
    EXPECT_EQ(keys.account_for(bad), std::nullopt) << bad.substr(0, 80);
    EXPECT_FALSE(keys.revoke(bad));
  }
  EXPECT_EQ(keys.account_for(real), "alice");
}

TEST(ApiKeys, OnlyTheHashIsStored) {
  const auto path = test::fresh_dir("keys-hash") / "coordinator.sqlite";
  std::string key;
  {
    auto keys = ApiKeys::open(path);
    key = keys.create("alice");
    const std::string secret = key.substr(3);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT * FROM api_keys", -1, &s, nullptr), SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
      ++rows;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
        const std::string v = text ? text : "";
        EXPECT_EQ(v.find(secret), std::string::npos) << sqlite3_column_name(s, c);
        EXPECT_EQ(v.find(secret.substr(0, 16)), std::string::npos) << sqlite3_column_name(s, c);
      }
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))), sha256_hex(key));
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    EXPECT_EQ(rows, 1);
  }
  // Nor anywhere in the files' bytes (the WAL is checkpointed into the file on the last close).
  for (const char* suffix : {"", "-wal"}) {
    std::ifstream in(path.string() + suffix, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    EXPECT_EQ(bytes.str().find(key.substr(3)), std::string::npos) << suffix;
  }
  EXPECT_EQ(ApiKeys::open(path).account_for(key), "alice");
}

TEST(ApiKeys, SharedBetweenConnections) {
  const auto path = test::fresh_dir("keys-shared") / "coordinator.sqlite";
  auto one = ApiKeys::open(path);
  auto two = ApiKeys::open(path);
  const std::string key = one.create("carol");
  EXPECT_EQ(two.account_for(key), "carol");
  EXPECT_TRUE(two.revoke(key));
  EXPECT_EQ(one.account_for(key), std::nullopt);
}

TEST(ApiKeys, RefusesAFileThatIsNotADatabase) {
  test::expect_refuses_text_file("keys-text", [](const std::filesystem::path& p) { ApiKeys::open(p); });
}

// Each store is a file of its own kind: a replay guard's file is not taken for a key store (nor
// silently given a second set of tables).
TEST(ApiKeys, RefusesAFileOfAnotherKind) {
  const auto path = test::fresh_dir("keys-kind") / "nonces.sqlite";
  DatabaseNonceStore::open(path);
  try {
    ApiKeys::open(path);
    ADD_FAILURE() << "opened a replay guard as an API key store";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("orchard-nonces"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace orchard::network
