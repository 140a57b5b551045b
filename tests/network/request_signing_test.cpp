// Signed node requests: a signed request verifies and names its node; unsigned, forged,
// altered, mismatched, stale, replayed and garbled ones are refused, never thrown.
#include "network/nonce_store.h"
#include "network/protocol_names.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <stdexcept>

#include "network/test_files.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr int64_t kSignNow = 1'700'000'000'000;
constexpr const char* kBody = R"({"job":"job-42","tokens":17})";
constexpr const char* kTarget = "/v1/jobs/job-42/result?attempt=2";

class RequestSigning : public ::testing::Test {
 protected:
  NodeIdentity a = NodeIdentity::from_key(generate_ed25519_key());
  NodeIdentity b = NodeIdentity::from_key(generate_ed25519_key());
  std::map<std::string, std::string> registry{{a.id(), a.public_key_hex()}, {b.id(), b.public_key_hex()}};
  MemoryNonceStore nonces;
  KeyLookup lookup = [this](const std::string& id) -> std::optional<std::string> {
    const auto it = registry.find(id);
    if (it == registry.end()) return std::nullopt;
    return it->second;
  };

  Headers signed_by(const NodeIdentity& who, int64_t at = kSignNow) { return sign_request(who, "POST", kTarget, kBody, at); }

  AuthResult check(const Headers& h, const std::string& method = "POST", const std::string& target = kTarget,
                   const std::string& body = kBody, int64_t now = kSignNow, const VerifyOptions& options = {}) {
    return verify_request(h, method, target, body, now, lookup, nonces, options);
  }
};

#define EXPECT_REFUSED(result, expected_status)                                                       \
  do {                                                                                                \
    const AuthResult r_ = (result);                                                                   \
    EXPECT_EQ(r_.status, expected_status) << to_string(r_.status) << ": " << r_.reason;               \
    EXPECT_TRUE(r_.node_id.empty()) << r_.node_id;                                                    \
    EXPECT_FALSE(r_.reason.empty());                                                                  \
  } while (0)

TEST_F(RequestSigning, SignedRequestVerifiesAndNamesItsNode) {
  const Headers h = signed_by(a);
  EXPECT_EQ(h.size(), 5u);
  EXPECT_EQ(h.at(kNodeHeader), a.id());
  EXPECT_EQ(h.at(kKeyHeader), a.public_key_hex());
  EXPECT_EQ(h.at(kTimestampHeader), std::to_string(kSignNow));
  EXPECT_EQ(h.at(kNonceHeader).size(), 32u);
  const AuthResult r = check(h);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.node_id, a.id());
  EXPECT_EQ(r.public_key_hex, a.public_key_hex());
  EXPECT_FALSE(r.registering);
  // Nonces are fresh per request.
  EXPECT_NE(signed_by(a).at(kNonceHeader), h.at(kNonceHeader));
}

TEST_F(RequestSigning, EmptyBodyAndGetRequestsVerify) {
  const AuthResult r = check(sign_request(a, "GET", "/v1/work", "", kSignNow), "GET", "/v1/work", "");
  EXPECT_TRUE(r.ok()) << r.reason;
}

TEST_F(RequestSigning, CanonicalRequestIsTheDocumentedFormat) {
  const std::string hash(64, 'c'), nonce(32, 'd');
  EXPECT_EQ(canonical_request(a.id(), "POST", "/x?y=1", hash, 123, nonce),
            "orchard-node-request-v1\n" + a.id() + "\nPOST\n/x?y=1\n" + hash + "\n123\n" + nonce);
  EXPECT_THROW(canonical_request(a.id(), "POST", "/x\nPOST", hash, 123, nonce), Error);
  EXPECT_THROW(canonical_request(a.id(), "post", "/x", hash, 123, nonce), Error);
  EXPECT_THROW(canonical_request(a.id(), "POST", "x", hash, 123, nonce), Error);
  EXPECT_THROW(canonical_request("node-1", "POST", "/x", hash, 123, nonce), Error);
}

TEST_F(RequestSigning, UnsignedRequestIsRefused) {
  EXPECT_REFUSED(check({}), AuthStatus::MissingHeader);
  EXPECT_REFUSED(check({{"Content-Type", "application/json"}}), AuthStatus::MissingHeader);
  // Each required header alone missing.
  for (const char* name : {kNodeHeader, kTimestampHeader, kNonceHeader, kSignatureHeader}) {
    Headers h = signed_by(a);
    h.erase(name);
    EXPECT_REFUSED(check(h), AuthStatus::MissingHeader);
  }
}

TEST_F(RequestSigning, KeyHeaderIsOptionalForARegisteredNode) {
  Headers h = signed_by(a);
  h.erase(kKeyHeader);
  const AuthResult r = check(h);
  EXPECT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.node_id, a.id());
}

TEST_F(RequestSigning, HeaderNamesAreCaseInsensitive) {
  Headers lower;
  for (const auto& [name, value] : signed_by(a)) {
    std::string n = name;
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    lower[n] = value;
  }
  EXPECT_TRUE(check(lower).ok());
  // The same header twice in different case is ambiguous: refused.
  Headers twice = signed_by(a);
  twice["x-orchard-nonce"] = twice.at(kNonceHeader);
  EXPECT_REFUSED(check(twice), AuthStatus::Malformed);
}

TEST_F(RequestSigning, SignatureByAnotherKeyIsRefused) {
  // B signs a request claiming to be A (without presenting a key): A's registered key fails it.
  Headers forged = signed_by(b);
  forged[kNodeHeader] = a.id();
  forged.erase(kKeyHeader);
  EXPECT_REFUSED(check(forged), AuthStatus::BadSignature);
  // A's genuine headers with B's signature over the same canonical request.
  Headers h = signed_by(a);
  h[kSignatureHeader] =
      b.sign(canonical_request(a.id(), "POST", kTarget, sha256_hex(kBody), kSignNow, h.at(kNonceHeader)));
  EXPECT_REFUSED(check(h), AuthStatus::BadSignature);
  // One flipped digit.
  Headers flipped = signed_by(a);
  char& c = flipped[kSignatureHeader][10];
  c = c == '0' ? '1' : '0';
  EXPECT_REFUSED(check(flipped), AuthStatus::BadSignature);
}

TEST_F(RequestSigning, TamperedMethodTargetOrBodyIsRefused) {
  EXPECT_REFUSED(check(signed_by(a), "PUT"), AuthStatus::BadSignature);
  EXPECT_REFUSED(check(signed_by(a), "POST", "/v1/jobs/job-43/result?attempt=2"), AuthStatus::BadSignature);
  EXPECT_REFUSED(check(signed_by(a), "POST", "/v1/jobs/job-42/result?attempt=3"), AuthStatus::BadSignature);
  EXPECT_REFUSED(check(signed_by(a), "POST", "/v1/jobs/job-42/result"), AuthStatus::BadSignature);
  EXPECT_REFUSED(check(signed_by(a), "POST", kTarget, R"({"job":"job-42","tokens":18})"), AuthStatus::BadSignature);
  EXPECT_REFUSED(check(signed_by(a), "POST", kTarget, ""), AuthStatus::BadSignature);
  // And the signed header fields themselves.
  Headers later = signed_by(a);
  later[kTimestampHeader] = std::to_string(kSignNow + 1);
  EXPECT_REFUSED(check(later), AuthStatus::BadSignature);
  Headers other_nonce = signed_by(a);
  other_nonce[kNonceHeader] = std::string(32, '7');
  EXPECT_REFUSED(check(other_nonce), AuthStatus::BadSignature);
}

TEST_F(RequestSigning, NodeIdNotMatchingItsKeyIsRefused) {
  // A signs honestly but claims B's id while presenting its own key.
  Headers h = signed_by(a);
  h[kNodeHeader] = b.id();
  EXPECT_REFUSED(check(h), AuthStatus::KeyMismatch);
  // A presents B's key under B's id, but signs with its own: the key is B's, the signature is not.
  Headers stolen_key = signed_by(a);
  stolen_key[kNodeHeader] = b.id();
  stolen_key[kKeyHeader] = b.public_key_hex();
  EXPECT_REFUSED(check(stolen_key), AuthStatus::BadSignature);
  // A registry whose key for A is not the one A presents.
  registry[a.id()] = b.public_key_hex();
  EXPECT_REFUSED(check(signed_by(a)), AuthStatus::KeyMismatch);
}

TEST_F(RequestSigning, UnknownNodeIsRefusedUnlessRegistering) {
  const auto c = NodeIdentity::from_key(generate_ed25519_key());
  EXPECT_REFUSED(check(signed_by(c)), AuthStatus::UnknownNode);
  VerifyOptions registration;
  registration.allow_unregistered = true;
  const AuthResult r = check(signed_by(c), "POST", kTarget, kBody, kSignNow, registration);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_TRUE(r.registering);
  EXPECT_EQ(r.node_id, c.id());
  EXPECT_EQ(r.public_key_hex, c.public_key_hex());
  // Registering still needs the key, and a key the id derives from.
  Headers no_key = signed_by(c);
  no_key.erase(kKeyHeader);
  EXPECT_REFUSED(check(no_key, "POST", kTarget, kBody, kSignNow, registration), AuthStatus::UnknownNode);
  const auto d = NodeIdentity::from_key(generate_ed25519_key());
  Headers wrong_id = signed_by(d);
  wrong_id[kNodeHeader] = c.id();
  EXPECT_REFUSED(check(wrong_id, "POST", kTarget, kBody, kSignNow, registration), AuthStatus::KeyMismatch);
}

TEST_F(RequestSigning, StaleTimestampIsRefusedPastAndFuture) {
  EXPECT_REFUSED(check(signed_by(a, kSignNow - 60'001)), AuthStatus::Stale);
  EXPECT_REFUSED(check(signed_by(a, kSignNow + 60'001)), AuthStatus::Stale);
  EXPECT_REFUSED(check(signed_by(a, 0)), AuthStatus::Stale);
  EXPECT_REFUSED(check(signed_by(a, kSignNow - 3'600'000)), AuthStatus::Stale);
  EXPECT_NE(check(signed_by(a, kSignNow - 61'000)).reason.find("61000 ms in the past"), std::string::npos);
  EXPECT_NE(check(signed_by(a, kSignNow + 61'000)).reason.find("61000 ms in the future"), std::string::npos);
  // The window's edges are inside it.
  EXPECT_TRUE(check(signed_by(a, kSignNow - 60'000)).ok());
  EXPECT_TRUE(check(signed_by(a, kSignNow + 60'000)).ok());
  VerifyOptions tight;
  tight.max_skew_ms = 5'000;
  EXPECT_REFUSED(check(signed_by(a, kSignNow - 5'001), "POST", kTarget, kBody, kSignNow, tight), AuthStatus::Stale);
  EXPECT_TRUE(check(signed_by(a, kSignNow - 4'999), "POST", kTarget, kBody, kSignNow, tight).ok());
}

TEST_F(RequestSigning, ReplayedRequestIsRefused) {
  const Headers h = signed_by(a);
  ASSERT_TRUE(check(h).ok());
  EXPECT_REFUSED(check(h), AuthStatus::Replayed);
  EXPECT_REFUSED(check(h, "POST", kTarget, kBody, kSignNow + 59'000), AuthStatus::Replayed);
  // Once the window has passed, the clock refuses it (the guard may have forgotten it by then).
  EXPECT_REFUSED(check(h, "POST", kTarget, kBody, kSignNow + 60'001), AuthStatus::Stale);
  // The same request content with a fresh nonce is a new request.
  EXPECT_TRUE(check(signed_by(a)).ok());
  // A refused request does not spend its nonce: the genuine one still goes through after.
  Headers genuine = signed_by(b);
  Headers tampered = genuine;
  EXPECT_REFUSED(check(tampered, "POST", kTarget, "{}"), AuthStatus::BadSignature);
  EXPECT_TRUE(check(genuine).ok());
}

TEST_F(RequestSigning, ReplayIsRefusedAcrossSqliteConnections) {
  const auto db = test::fresh_dir("replay-sqlite") / "coordinator.sqlite";
  auto replica1 = DatabaseNonceStore::open(db);
  auto replica2 = DatabaseNonceStore::open(db);
  const Headers h = signed_by(a);
  const AuthResult first = verify_request(h, "POST", kTarget, kBody, kSignNow, lookup, *replica1);
  ASSERT_TRUE(first.ok()) << first.reason;
  EXPECT_REFUSED(verify_request(h, "POST", kTarget, kBody, kSignNow + 1, lookup, *replica2), AuthStatus::Replayed);
  EXPECT_REFUSED(verify_request(h, "POST", kTarget, kBody, kSignNow + 2, lookup, *replica1), AuthStatus::Replayed);
  EXPECT_TRUE(verify_request(signed_by(a), "POST", kTarget, kBody, kSignNow, lookup, *replica2).ok());
}

TEST_F(RequestSigning, AuthenticatedIdIsTheSignerNotWhatTheBodyClaims) {
  // B reports work on A's job, naming A in the body: verification succeeds, but it names B,
  // which the coordinator compares with the job's assignee (A) and refuses.
  const std::string body = R"({"job":"job-42","node":")" + a.id() + R"("})";
  const AuthResult r = check(sign_request(b, "POST", kTarget, body, kSignNow), "POST", kTarget, body);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.node_id, b.id());
  EXPECT_NE(r.node_id, a.id());
}

TEST_F(RequestSigning, GarbageHeaderValuesAreRefusedWithoutThrowing) {
  const std::string huge(1 << 20, 'a');
  const std::vector<std::pair<const char*, std::string>> garbage = {
      {kNodeHeader, ""},
      {kNodeHeader, "node-xyz"},
      {kNodeHeader, "NODE-" + a.id().substr(5)},
      {kNodeHeader, a.id() + "\n"},
      {kNodeHeader, huge},
      {kKeyHeader, "zz"},
      {kKeyHeader, std::string(64, 'G')},
      {kKeyHeader, huge},
      {kTimestampHeader, ""},
      {kTimestampHeader, "-5"},
      {kTimestampHeader, "12a"},
      {kTimestampHeader, " 1700000000000"},
      {kTimestampHeader, "99999999999999999999999"},
      {kTimestampHeader, huge},
      {kNonceHeader, "short"},
      {kNonceHeader, std::string(32, 'A')},
      {kNonceHeader, std::string(31, '0') + "\xff"},
      {kNonceHeader, huge},
      {kSignatureHeader, ""},
      {kSignatureHeader, std::string(128, 'x')},
      {kSignatureHeader, std::string(126, '0')},
      {kSignatureHeader, std::string("\0\0\0", 3)},
      {kSignatureHeader, huge},
  };
  for (const auto& [name, value] : garbage) {
    Headers h = signed_by(a);
    h[name] = value;
    EXPECT_REFUSED(check(h), AuthStatus::Malformed);
  }
  // The request line itself, from a misbehaving server or client.
  EXPECT_REFUSED(check(signed_by(a), "post"), AuthStatus::Malformed);
  EXPECT_REFUSED(check(signed_by(a), ""), AuthStatus::Malformed);
  EXPECT_REFUSED(check(signed_by(a), "POST", ""), AuthStatus::Malformed);
  EXPECT_REFUSED(check(signed_by(a), "POST", "v1/jobs"), AuthStatus::Malformed);
  EXPECT_REFUSED(check(signed_by(a), "POST", "/v1/jobs two"), AuthStatus::Malformed);
  EXPECT_REFUSED(check(signed_by(a), "POST", "/" + huge), AuthStatus::Malformed);
  // Thousands of unrelated headers are only noise.
  Headers crowded = signed_by(a);
  for (int i = 0; i < 5000; ++i) crowded["X-Noise-" + std::to_string(i)] = std::to_string(i);
  EXPECT_TRUE(check(crowded).ok());
}

TEST_F(RequestSigning, NoSingleCharacterChangeOfAHeaderIsAccepted) {
  const Headers genuine = signed_by(a);
  std::mt19937 rng(1234);
  const std::string alphabet = "0123456789abcdefABCDEF-node\n \x01\xff";
  for (int i = 0; i < 2000; ++i) {
    Headers h = genuine;
    auto it = h.begin();
    std::advance(it, static_cast<long>(rng() % h.size()));
    std::string& v = it->second;
    const size_t pos = rng() % v.size();
    const char replacement = alphabet[rng() % alphabet.size()];
    if (v[pos] == replacement) continue;
    v[pos] = replacement;
    const AuthResult r = check(h);
    EXPECT_FALSE(r.ok()) << it->first << " = " << v;
  }
  EXPECT_TRUE(check(genuine).ok());  // none of the refusals spent the nonce
}

TEST_F(RequestSigning, FailingLookupOrGuardIsUnavailableNotAccepted) {
  KeyLookup broken = [](const std::string&) -> std::optional<std::string> {
    throw std::runtime_error("database is locked");
  };
  EXPECT_REFUSED(verify_request(signed_by(a), "POST", kTarget, kBody, kSignNow, broken, nonces), AuthStatus::Unavailable);
  struct BrokenStore : NonceStore {
    bool remember(const std::string&, const std::string&, int64_t, int64_t) override {
      throw Error("disk I/O error");
    }
  } broken_store;
  const AuthResult r = verify_request(signed_by(a), "POST", kTarget, kBody, kSignNow, lookup, broken_store);
  EXPECT_REFUSED(r, AuthStatus::Unavailable);
  EXPECT_NE(r.reason.find("disk I/O error"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace orchard::network
