// An owner's check of the ledger (ledger_proof.h): entries under a head signed by the trusted
// key verify; an altered entry, a forged or altered head, an entry left out of the owner's
// list and a rewritten history behind a verified anchor are each caught and named. On SQLite and
// PostgreSQL.
#include "network/ledger.h"
#include "network/protocol_names.h"

#include <gtest/gtest.h>

#include "network/store_backends.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

bool mentions(const OwnerCheck& c, const std::string& text) {
  for (const auto& v : c.violations)
    if (v.find(text) != std::string::npos) return true;
  return false;
}

std::string all(const OwnerCheck& c) {
  std::string s;
  for (const auto& v : c.violations) s += v + "\n";
  return s;
}

// A ledger of six payments (alice is paid at seq 2, 4 and 6; bob at 1, 3, 5), its head signed.
struct Fixture {
  std::string path;
  Ledger ledger;
  KeyPtr key = generate_ed25519_key();
  SignedHead head;

  // `location`: a fresh ledger, an SQLite file or a PostgreSQL database.
  explicit Fixture(const std::string& location) : path(location), ledger(Ledger::open(path)) {
    for (int i = 1; i <= 6; ++i)
      ledger.pay("job-" + std::to_string(i), 1, "carol", i % 2 ? "bob" : "alice", 100 * i, {{"n", i}});
    head = ledger.sign_head(key.get());
  }
  std::string key_hex() { return public_key_hex(key.get()); }
  // What the coordinator serves alice for `head`, from `anchor` on.
  OwnerProof proof(std::optional<Head> anchor = std::nullopt) {
    OwnerProof p;
    p.head = head;
    p.anchor = anchor;
    p.listed = ledger.entries_for("alice");
    p.chain = ledger.entries_range(proof_start(p.head, p.listed, p.anchor), head.seq);
    return p;
  }
};

// Every proof test runs on both backends: the chain segment comes from Ledger::entries_range.
class OwnerProofTest : public test::BackendTest {};

INSTANTIATE_TEST_SUITE_P(Backends, OwnerProofTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

TEST_P(OwnerProofTest, TheOwnersEntriesUnderTheSignedHeadVerify) {
  Fixture f(fresh("proof-ok"));
  OwnerProof p = f.proof();
  EXPECT_EQ(p.chain.front().seq, 2);  // from alice's first entry, not the ledger's
  OwnerCheck c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(c.ok()) << all(c);
  EXPECT_EQ(c.verified, 3);

  // A payment after the head is listed but not signed yet: pending, not a violation.
  f.ledger.pay("job-7", 1, "carol", "alice", 50, {});
  p = f.proof();
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(c.ok()) << all(c);
  EXPECT_EQ(c.verified, 3);
  EXPECT_EQ(c.pending, 1);

  // The next head, checked from the anchor: only what came since is re-hashed.
  const Head anchor{f.head.seq, f.head.hash};
  f.head = f.ledger.sign_head(f.key.get());
  p = f.proof(anchor);
  EXPECT_EQ(p.chain.size(), 1u);
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(c.ok()) << all(c);
  EXPECT_EQ(c.verified, 1);
  EXPECT_EQ(c.earlier, 3);
}

TEST_P(OwnerProofTest, AnAlteredEntryIsDetected) {
  Fixture f(fresh("proof-altered"));
  // The amount changed in what is served, hash left as it was.
  OwnerProof p = f.proof();
  p.chain[2].amount = 1'000'000;  // seq 4, alice's
  p.listed[1].amount = 1'000'000;
  OwnerCheck c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "entry seq 4 (job job-4) was altered")) << all(c);

  // With its hash recomputed too, the next entry no longer links to it.
  p.chain[2].hash = p.listed[1].hash = entry_hash(p.chain[2]);
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "the chain is broken at seq 5")) << all(c);

  // And when every later hash is recomputed, the chain no longer ends at the signed head.
  for (size_t i = 3; i < p.chain.size(); ++i) {
    p.chain[i].prev_hash = p.chain[i - 1].hash;
    p.chain[i].hash = entry_hash(p.chain[i]);
  }
  p.listed = {p.chain[0], p.chain[2], p.chain[4]};
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_EQ(c.violations.size(), 1u) << all(c);
  EXPECT_TRUE(mentions(c, "the chain does not end at the signed head (seq 6)")) << all(c);

  // The owner's list differing from the chain at the same seq.
  p = f.proof();
  p.listed[0].details = "{}";
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "entry seq 2 (job job-2) differs from the chain's entry")) << all(c);
}

TEST_P(OwnerProofTest, AForgedOrAlteredHeadIsDetected) {
  Fixture f(fresh("proof-forged"));
  // Signed by another key, which says so.
  const NodeIdentity other = NodeIdentity::from_key(generate_ed25519_key());
  OwnerProof p = f.proof();
  p.head.public_key = other.public_key_hex();
  p.head.signature = other.sign(head_message(p.head.seq, p.head.hash));
  OwnerCheck c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "not the trusted key")) << all(c);

  // Claiming the trusted key with another key's signature.
  p.head.public_key = f.key_hex();
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "the signature does not verify")) << all(c);

  // A genuine signature over another (seq, hash).
  p = f.proof();
  p.head.hash = std::string(64, 'e');
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "the signature does not verify")) << all(c);
  p = f.proof();
  p.head.signature = "zz";
  EXPECT_TRUE(mentions(check_owner_proof(p, f.key_hex(), "alice"), "the signature does not verify"));
}

TEST_P(OwnerProofTest, AnEntryLeftOutOrAHistoryRewrittenBehindTheAnchorIsDetected) {
  Fixture f(fresh("proof-omitted"));
  OwnerProof p = f.proof();
  p.listed.erase(p.listed.begin() + 1);
  OwnerCheck c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "entry seq 4 (job job-4) of 'alice' is in the chain but was left out")) << all(c);

  // Someone else's entry passed off as alice's.
  p = f.proof();
  p.listed.push_back(p.chain[1]);  // seq 3, bob's
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "neither pays nor credits it")) << all(c);

  // A chain with a gap.
  p = f.proof();
  p.chain.erase(p.chain.begin() + 1);
  c = check_owner_proof(p, f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "not contiguous: seq 3 expected, seq 4 served")) << all(c);

  // The anchor verified before is not what the chain now links to: history was rewritten.
  f.ledger.pay("job-7", 1, "carol", "alice", 50, {});
  f.head = f.ledger.sign_head(f.key.get());
  c = check_owner_proof(f.proof(Head{6, std::string(64, 'c')}), f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "broken at seq 7: prev_hash does not match the hash before it (the head verified before)")) << all(c);
  // Same seq, other hash.
  c = check_owner_proof(f.proof(Head{7, std::string(64, 'c')}), f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "has another hash than the head verified before")) << all(c);
  // A head older than the anchor.
  c = check_owner_proof(f.proof(Head{9, std::string(64, 'c')}), f.key_hex(), "alice");
  EXPECT_TRUE(mentions(c, "the ledger went back")) << all(c);
  // No chain served where one is needed.
  p = f.proof();
  p.chain.clear();
  EXPECT_TRUE(mentions(check_owner_proof(p, f.key_hex(), "alice"), "no chain was served from seq 2"));
}

TEST_P(OwnerProofTest, EntriesAndHeadsRoundTripThroughJsonAndMalformedOnesAreNamed) {
  Fixture f(fresh("proof-json"));
  const Entry e = f.ledger.entries_for("alice")[0];
  const Entry back = entry_from_json(to_json(e));
  EXPECT_EQ(back.hash, e.hash);
  EXPECT_EQ(entry_hash(back), e.hash);
  const SignedHead h = signed_head_from_json(to_json(f.head));
  EXPECT_EQ(h.signature, f.head.signature);
  EXPECT_EQ(h.seq, f.head.seq);
  nlohmann::json bad = to_json(e);
  bad["amount"] = "lots";
  try {
    entry_from_json(bad);
    ADD_FAILURE() << "accepted a string amount";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'amount'"), std::string::npos) << err.what();
  }
  EXPECT_THROW(signed_head_from_json(nlohmann::json::array()), Error);
}

}  // namespace
}  // namespace orchard::network
