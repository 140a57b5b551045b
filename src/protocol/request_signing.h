#pragma once
// Signed node requests: every HTTP request a node makes to the coordinator carries an Ed25519
// signature over what the request does, when, and a one-time nonce, so the coordinator can
// refuse anything unsigned, forged, altered, stale or replayed, and knows which node it talks
// to (the authenticated id is what the caller compares with a job's assignee).
//
// The signed message, the "canonical request", is seven lines joined by '\n' (no trailing
// newline):
//
//   orchard-node-request-v1
//   <node id>            node-<32 lowercase hex>, X-Orchard-Node
//   <method>             upper case, e.g. POST
//   <target>             the request target exactly as sent: path and '?query', not decoded
//   <body sha256>        64 lowercase hex digits of SHA-256 over the body bytes (empty body too)
//   <timestamp>          Unix milliseconds, decimal, X-Orchard-Timestamp
//   <nonce>              32 lowercase hex digits (128 random bits), X-Orchard-Nonce
//
// None of the fields can contain '\n' (each is checked), so the lines cannot be shifted into
// one another. The signature (128 lowercase hex) travels in X-Orchard-Signature and the node's
// public key (64 lowercase hex) in X-Orchard-Key, which the coordinator needs at registration
// and afterwards checks against the registered one.
//
// A request is fresh while |now − timestamp| ≤ the skew window (60 s by default); its nonce is
// remembered for that long, so within the window a replay is caught by the nonce and after it
// by the clock.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/node_identity.h"

namespace orchard::protocol {

// The replay guard verify_request consults (the coordinator's stores: network/nonce_store.h).
class NonceStore {
 public:
  virtual ~NonceStore() = default;
  // Records `nonce` from `node_id` until `expires_at_ms`. False when the pair is already
  // recorded and not yet expired: the request is a replay. `now_ms` is the caller's clock (the
  // same one the timestamp check used), so entries that expired before it may be dropped.
  // Throws orchard::Error when the store itself fails; callers refuse the request then.
  virtual bool remember(const std::string& node_id, const std::string& nonce, int64_t expires_at_ms,
                        int64_t now_ms) = 0;
};

inline constexpr const char* kNodeHeader = "X-Orchard-Node";
inline constexpr const char* kKeyHeader = "X-Orchard-Key";
inline constexpr const char* kTimestampHeader = "X-Orchard-Timestamp";
inline constexpr const char* kNonceHeader = "X-Orchard-Nonce";
inline constexpr const char* kSignatureHeader = "X-Orchard-Signature";
inline constexpr int64_t kDefaultMaxSkewMs = 60'000;

// Header name → value. Names are matched case-insensitively, as HTTP requires.
using Headers = std::map<std::string, std::string>;

// The canonical request above. Throws orchard::Error when a field would break the format
// (a method that is not upper-case letters, a target with spaces or control characters, …).
std::string canonical_request(std::string_view node_id, std::string_view method, std::string_view target,
                              std::string_view body_sha256_hex, int64_t timestamp_ms, std::string_view nonce);

// The five X-Orchard-* headers for one request, with a fresh random nonce.
Headers sign_request(const NodeIdentity& identity, std::string_view method, std::string_view target,
                     std::string_view body, int64_t now_ms);

enum class AuthStatus {
  Ok,
  MissingHeader,  // an X-Orchard-* header is absent (an unsigned request has none)
  Malformed,      // a header value, the method or the target is not in its format
  UnknownNode,    // no key registered for the node id (and registration not allowed here)
  KeyMismatch,    // the node id does not derive from the presented key, or that key is not the registered one
  BadSignature,   // the signature does not verify: forged, or any signed field altered
  Stale,          // the timestamp is outside the skew window, past or future
  Replayed,       // this node already used this nonce inside the window
  Unavailable,    // the key lookup or the replay guard failed: refuse, and say it is our fault
};
const char* to_string(AuthStatus s);

struct AuthResult {
  AuthStatus status = AuthStatus::Malformed;
  std::string reason;          // for logs and the error body; never echoes raw header values
  std::string node_id;         // the authenticated node; empty unless ok()
  std::string public_key_hex;  // the key that verified; for a registration, the one to record
  bool registering = false;    // ok() for a node the lookup did not know (allow_unregistered)
  bool ok() const { return status == AuthStatus::Ok; }
};

// The registered public key (hex) of a node id, or nullopt when the node is unknown. May throw
// (a database error); verify_request turns that into Unavailable.
using KeyLookup = std::function<std::optional<std::string>(const std::string& node_id)>;

struct VerifyOptions {
  int64_t max_skew_ms = kDefaultMaxSkewMs;
  // For the registration endpoint: a node the lookup does not know is accepted on the key it
  // presents in X-Orchard-Key, which it must own (its id derives from it, and it signed).
  bool allow_unregistered = false;
};

// Checks a node request and returns who sent it. Never throws: hostile input (missing, huge,
// garbled or duplicated headers) is a refusal with a reason. The nonce is recorded only for a
// request whose signature verified, so nobody can spend another node's nonces.
AuthResult verify_request(const Headers& headers, std::string_view method, std::string_view target,
                          std::string_view body, int64_t now_ms, const KeyLookup& lookup, NonceStore& nonces,
                          const VerifyOptions& options = {}) noexcept;

}  // namespace orchard::protocol
