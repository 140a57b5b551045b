// Node identity: the key is made once, kept private, reloaded identically, and never silently
// replaced; the id derives from the public key.
#include "network/protocol_names.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "network/test_files.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// load_or_create must throw an orchard::Error that names the path and leave the file alone.
void expect_refused(const fs::path& key, const std::string& why_contains) {
  const std::string before = fs::is_regular_file(key) ? read_text(key) : "";
  try {
    NodeIdentity::load_or_create(key);
    ADD_FAILURE() << "loaded " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(why_contains), std::string::npos) << e.what();
  }
  if (fs::is_regular_file(key)) {
    EXPECT_EQ(read_text(key), before) << "the key file was replaced";
  }
}

TEST(NodeIdentity, CreatedOnceAndReloadedIdentically) {
  const auto key = test::fresh_dir("identity-create") / "a" / "b" / "node.key";
  const auto first = NodeIdentity::load_or_create(key);
  ASSERT_TRUE(fs::is_regular_file(key));
  const std::string pem = read_text(key);
  EXPECT_NE(pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(first.id().size(), 37u);
  EXPECT_EQ(first.id().rfind("node-", 0), 0u);
  EXPECT_EQ(first.public_key_hex().size(), 64u);

  const auto again = NodeIdentity::load_or_create(key);
  EXPECT_EQ(again.id(), first.id());
  EXPECT_EQ(again.public_key_hex(), first.public_key_hex());
  EXPECT_EQ(read_text(key), pem);
  // Ed25519 is deterministic: the reloaded key makes the very same signature.
  EXPECT_EQ(again.sign("hello"), first.sign("hello"));
  EXPECT_TRUE(verify_node_signature(first.public_key_hex(), "hello", again.sign("hello")));

  const auto other = NodeIdentity::load_or_create(key.parent_path() / "other.key");
  EXPECT_NE(other.id(), first.id());
}

TEST(NodeIdentity, KeyFileIsPrivateAndNoTempFileIsLeft) {
  const auto dir = test::fresh_dir("identity-mode");
  const auto old_umask = ::umask(0);  // the mode must not depend on a permissive umask
  NodeIdentity::load_or_create(dir / "node.key");
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "node.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "node.key");
  }
  EXPECT_EQ(files, 1);
}

TEST(NodeIdentity, CorruptKeyFileIsAnErrorNamingThePath) {
  const auto dir = test::fresh_dir("identity-corrupt");
  const auto garbage = dir / "garbage.key";
  std::ofstream(garbage) << "this is not a key\n";
  expect_refused(garbage, "not a PEM private key");

  const auto empty = dir / "empty.key";
  std::ofstream{empty};
  expect_refused(empty, "not a PEM private key");

  const auto good = dir / "good.key";
  NodeIdentity::load_or_create(good);
  const std::string pem = read_text(good);
  const auto truncated = dir / "truncated.key";
  std::ofstream(truncated) << pem.substr(0, pem.size() / 2);
  expect_refused(truncated, "not a PEM private key");

  // A well-formed key of the wrong algorithm is refused too, not used and not replaced.
  const auto ec = dir / "ec.key";
  {
    EVP_PKEY* k = EVP_EC_gen("P-256");
    ASSERT_NE(k, nullptr);
    BIO* bio = BIO_new_file(ec.c_str(), "w");
    ASSERT_EQ(PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr), 1);
    BIO_free(bio);
    EVP_PKEY_free(k);
  }
  expect_refused(ec, "not an Ed25519 key");

  const auto is_dir = dir / "a-directory.key";
  fs::create_directories(is_dir);
  expect_refused(is_dir, "not a regular file");
}

TEST(NodeIdentity, UnreachableKeyPathIsAnError) {
  // A path through a regular file: open() fails with ENOTDIR, for root too.
  const auto dir = test::fresh_dir("identity-unreachable");
  std::ofstream(dir / "plain-file") << "x";
  expect_refused(dir / "plain-file" / "node.key", "cannot open the node key");
}

TEST(NodeIdentity, UnreadableKeyFileIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const auto key = test::fresh_dir("identity-unreadable") / "node.key";
  NodeIdentity::load_or_create(key);
  fs::permissions(key, fs::perms::none);
  expect_refused(key, "cannot open the node key");
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(NodeIdentity, ConcurrentFirstStartsAgreeOnOneKey) {
  const auto key = test::fresh_dir("identity-race") / "node.key";
  std::vector<std::string> ids(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < ids.size(); ++t)
    threads.emplace_back([&, t] { ids[t] = NodeIdentity::load_or_create(key).id(); });
  for (auto& th : threads) th.join();
  for (const auto& id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(NodeIdentity::load_or_create(key).id(), ids[0]);
}

TEST(NodeIdentity, IdDerivesFromThePublicKey) {
  const auto a = NodeIdentity::from_key(generate_ed25519_key());
  EXPECT_EQ(node_id_for_public_key(a.public_key_hex()), a.id());
  std::string upper = a.public_key_hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(node_id_for_public_key(upper), a.id());
  EXPECT_EQ(node_id_for_public_key(""), std::nullopt);
  EXPECT_EQ(node_id_for_public_key(a.public_key_hex().substr(2)), std::nullopt);
  EXPECT_EQ(node_id_for_public_key(std::string(64, 'z')), std::nullopt);
  EXPECT_EQ(node_id_for_public_key(std::string(1 << 20, 'a')), std::nullopt);
}

TEST(NodeIdentity, SignaturesVerifyOnlyForTheSignersKeyAndMessage) {
  const auto a = NodeIdentity::from_key(generate_ed25519_key());
  const auto b = NodeIdentity::from_key(generate_ed25519_key());
  const std::string sig = a.sign("message");
  EXPECT_EQ(sig.size(), 128u);
  EXPECT_TRUE(verify_node_signature(a.public_key_hex(), "message", sig));
  EXPECT_FALSE(verify_node_signature(b.public_key_hex(), "message", sig));
  EXPECT_FALSE(verify_node_signature(a.public_key_hex(), "messagE", sig));
  EXPECT_FALSE(verify_node_signature(a.public_key_hex(), "message", sig.substr(2)));
  EXPECT_FALSE(verify_node_signature("zz", "message", sig));
  EXPECT_FALSE(verify_node_signature(a.public_key_hex(), "message", std::string(128, 'g')));
}

}  // namespace
}  // namespace orchard::network
