// `orchard node status`'s ledger check over HTTP against a running coordinator: the coordinator
// signs its head on a schedule with its own key (served at /v1/ledger/key, pinned on first
// use); an owner's entries verify; a tampered entry, a rewritten history (even re-signed by
// the coordinator) and a head signed by another key each fail the check and leave the pin.
#include "node/ledger_check.h"

#include <gtest/gtest.h>

#include "network/coordinator_fixture.h"
#include "network/ledger.h"
#include "network/protocol_names.h"

namespace orchard::node {
namespace {

using network::test::RunningCoordinator;

std::string all(const protocol::OwnerCheck& c) {
  std::string s;
  for (const auto& v : c.violations) s += v + "\n";
  return s;
}

bool mentions(const protocol::OwnerCheck& c, const std::string& text) { return all(c).find(text) != std::string::npos; }

// Pays `n` jobs from carol, alternately to alice and bob, straight into the coordinator's ledger.
void pay(const RunningCoordinator& c, int first, int n) {
  auto ledger = network::Ledger::open(c.files().ledger);
  for (int i = first; i < first + n; ++i)
    ledger.pay("job-" + std::to_string(i), 1, "carol", i % 2 ? "bob" : "alice", 10 * i, {{"i", i}});
}

// Waits until the coordinator has signed its head at `seq`.
void wait_signed(const RunningCoordinator& c, int64_t seq) {
  for (int i = 0; i < 1000; ++i) {
    const auto [status, head] = c.get(protocol::kLedgerHeadPath);
    if (status == 200 && head.value("seq", int64_t{0}) == seq) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "the coordinator did not sign its head at seq " << seq;
}

LedgerCheckOptions options(const RunningCoordinator& c, const std::string& account) {
  LedgerCheckOptions o;
  o.coordinator = c.url();
  o.account = account;
  o.pin_file = c.dir / ("pin-" + account + ".json");
  return o;
}

// Rewrites the amount of entry `seq` and every later hash, as a coordinator rewriting its own
// history would (the signed heads are left as they are).
void rewrite_history(const RunningCoordinator& c, int64_t seq, int64_t amount) {
  auto ledger = network::Ledger::open(c.files().ledger);
  auto entries = ledger.entries_range(seq, ledger.head().seq);
  std::string sql;
  std::string prev = entries.front().prev_hash;
  for (auto& e : entries) {
    if (e.seq == seq) e.amount = amount;
    e.prev_hash = prev;
    e.hash = protocol::entry_hash(e);
    prev = e.hash;
    sql += "UPDATE entries SET amount = " + std::to_string(e.amount) + ", prev_hash = '" + e.prev_hash + "', hash = '" +
           e.hash + "' WHERE seq = " + std::to_string(e.seq) + ";";
  }
  network::test::tamper(c.files().ledger, sql);
}

TEST(LedgerCheck, TheCoordinatorSignsOnAScheduleAndAnOwnersEntriesVerifyFromThePinnedKeyOn) {
  RunningCoordinator c("check-ok");
  // The served key is the coordinator's own, made under --data.
  const auto [ks, key] = c.get(protocol::kLedgerKeyPath);
  ASSERT_EQ(ks, 200);
  EXPECT_EQ(key["public_key"], protocol::NodeIdentity::load_or_create(c.files().signing_key).public_key_hex());
  EXPECT_EQ(c.get(protocol::kLedgerHeadPath).first, 404);  // nothing paid, nothing signed

  pay(c, 1, 5);  // alice: 2, 4; bob: 1, 3, 5
  wait_signed(c, 5);
  LedgerCheckResult r = check_owner_ledger(options(c, "alice"));
  EXPECT_TRUE(r.pinned_now);
  EXPECT_EQ(r.key, key["public_key"]);
  ASSERT_TRUE(r.head);
  EXPECT_TRUE(r.check.ok()) << all(r.check);
  EXPECT_EQ(r.check.verified, 2);

  // Later checks use the pin and start after the head verified last.
  pay(c, 6, 2);  // alice: 6
  wait_signed(c, 7);
  r = check_owner_ledger(options(c, "alice"));
  EXPECT_FALSE(r.pinned_now);
  EXPECT_TRUE(r.check.ok()) << all(r.check);
  EXPECT_EQ(r.check.earlier, 2);
  EXPECT_EQ(r.check.verified, 1);
  const auto bob = check_owner_ledger(options(c, "bob"));
  EXPECT_TRUE(bob.check.ok()) << all(bob.check);
  EXPECT_EQ(bob.check.verified, 4);

  // Malformed query parameters are 400s naming them.
  EXPECT_EQ(c.get(std::string(protocol::kLedgerChainPath) + "?from=0&to=3").first, 400);
  EXPECT_EQ(c.get(std::string(protocol::kLedgerChainPath) + "?from=1&to=5000").first, 400);
  EXPECT_EQ(c.get(std::string(protocol::kLedgerEntriesPath) + "?account=alice&after=x").second["error"]["param"], "after");
}

TEST(LedgerCheck, TheHeadIsSignedAtShutdown) {
  const auto dir = network::test::fresh_dir("check-shutdown");
  {
    RunningCoordinator c(network::test::ExistingDir{dir}, 3'600'000);  // no scheduled signing
    pay(c, 1, 3);
    EXPECT_FALSE(network::Ledger::open(c.files().ledger).latest_signed_head());
  }
  auto ledger = network::Ledger::open(network::coordinator_files(dir).ledger);
  const auto head = ledger.latest_signed_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->seq, 3);
  auto key = protocol::public_key_from_hex(head->public_key);
  EXPECT_TRUE(ledger.verify_head_signature(key.get()));
}

TEST(LedgerCheck, ATamperedEntryOrARewrittenHistoryFailsTheCheck) {
  RunningCoordinator c("check-tamper");
  pay(c, 1, 5);
  wait_signed(c, 5);
  ASSERT_TRUE(check_owner_ledger(options(c, "alice")).check.ok());

  // An entry edited in place: a fresh owner (no anchor) finds its hash no longer matches.
  network::test::tamper(c.files().ledger, "UPDATE entries SET amount = 1 WHERE seq = 4");
  auto fresh = options(c, "alice");
  fresh.pin_file = c.dir / "pin-fresh.json";
  fresh.trusted_key = protocol::NodeIdentity::load_or_create(c.files().signing_key).public_key_hex();
  LedgerCheckResult r = check_owner_ledger(fresh);
  EXPECT_TRUE(mentions(r.check, "entry seq 4 (job job-4) was altered")) << all(r.check);
  EXPECT_FALSE(std::filesystem::exists(fresh.pin_file));

  // The history rewritten with every hash recomputed and signed again by the coordinator
  // itself: the owner who verified seq 5 before sees the chain no longer link to it.
  rewrite_history(c, 2, 1);
  pay(c, 6, 1);
  wait_signed(c, 6);
  r = check_owner_ledger(options(c, "alice"));
  EXPECT_TRUE(mentions(r.check, "broken at seq 6: prev_hash does not match the hash before it (the head verified before)"))
      << all(r.check);
  // A fresh owner cannot tell (the coordinator signed the rewritten chain): the anchor is what protects.
  EXPECT_TRUE(check_owner_ledger(fresh).check.ok());
}

TEST(LedgerCheck, AHeadSignedByAnotherKeyFailsAgainstThePinnedKey) {
  // No scheduled signing: the test signs, as the coordinator and as a forger.
  RunningCoordinator c(network::test::ExistingDir{network::test::fresh_dir("check-forged")}, 3'600'000);
  const auto coordinator_key = protocol::NodeIdentity::load_or_create(c.files().signing_key);
  pay(c, 1, 2);
  network::Ledger::open(c.files().ledger).sign_head(coordinator_key.key());
  ASSERT_TRUE(check_owner_ledger(options(c, "alice")).check.ok());

  // Someone with the file but not the coordinator's key signs the next head with their own.
  pay(c, 3, 2);
  const auto forger = protocol::generate_ed25519_key();
  network::Ledger::open(c.files().ledger).sign_head(forger.get());
  auto r = check_owner_ledger(options(c, "alice"));
  EXPECT_TRUE(mentions(r.check, "not the trusted key")) << all(r.check);

  // Given a key that is not the coordinator's, its genuine heads fail too.
  network::Ledger::open(c.files().ledger).sign_head(coordinator_key.key());
  EXPECT_TRUE(check_owner_ledger(options(c, "alice")).check.ok());
  auto wrong = options(c, "alice");
  wrong.trusted_key = protocol::public_key_hex(forger.get());
  r = check_owner_ledger(wrong);
  EXPECT_TRUE(mentions(r.check, "not the trusted key")) << all(r.check);
}

}  // namespace
}  // namespace orchard::node
