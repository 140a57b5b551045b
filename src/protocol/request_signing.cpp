#include "protocol/request_signing.h"

#include <array>
#include <charconv>

#include "protocol/ledger_entry.h"
#include "protocol/secure_random.h"
#include "tensor/error.h"

namespace orchard::protocol {
namespace {

constexpr const char* kVersionLine = "orchard-node-request-v1";
constexpr size_t kMaxTargetBytes = 8192;
constexpr size_t kMaxMethodBytes = 16;
// 15 decimal digits reach the year 33658 and cannot overflow an int64.
constexpr size_t kMaxTimestampDigits = 15;

bool is_lower_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool valid_node_id(std::string_view id) { return id.size() == 37 && id.substr(0, 5) == "node-" && is_lower_hex(id.substr(5), 32); }

bool valid_method(std::string_view m) {
  if (m.empty() || m.size() > kMaxMethodBytes) return false;
  for (char c : m)
    if (c < 'A' || c > 'Z') return false;
  return true;
}

// An origin-form request target: '/' then visible ASCII only (no spaces, controls, '\n').
bool valid_target(std::string_view t) {
  if (t.empty() || t.size() > kMaxTargetBytes || t[0] != '/') return false;
  for (char c : t)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

std::optional<int64_t> parse_timestamp(std::string_view s) {
  if (s.empty() || s.size() > kMaxTimestampDigits) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// The X-Orchard-* headers of one request, found in one pass over however many headers came.
enum Field { kNode, kKey, kTimestamp, kNonce, kSignature, kFields };
constexpr std::array<const char*, kFields> kFieldNames = {kNodeHeader, kKeyHeader, kTimestampHeader, kNonceHeader,
                                                          kSignatureHeader};

struct SignedHeaders {
  std::array<const std::string*, kFields> value{};
  std::array<int, kFields> count{};
};

SignedHeaders collect(const Headers& headers) {
  SignedHeaders h;
  for (const auto& [name, v] : headers)
    for (size_t i = 0; i < kFields; ++i)
      if (iequals(name, kFieldNames[i])) {
        h.value[i] = &v;
        ++h.count[i];
      }
  return h;
}

AuthResult refuse(AuthStatus status, std::string reason) {
  AuthResult r;
  r.status = status;
  r.reason = std::move(reason);
  return r;
}

AuthResult verify_unguarded(const Headers& headers, std::string_view method, std::string_view target,
                            std::string_view body, int64_t now_ms, const KeyLookup& lookup, NonceStore& nonces,
                            const VerifyOptions& options) {
  // 1. Every header present, once, in its exact format. The key is needed only at registration.
  const SignedHeaders h = collect(headers);
  for (size_t i = 0; i < kFields; ++i) {
    if (h.count[i] > 1) return refuse(AuthStatus::Malformed, std::string(kFieldNames[i]) + " appears more than once");
    if (h.count[i] == 0 && i != kKey)
      return refuse(AuthStatus::MissingHeader, std::string("unsigned request: no ") + kFieldNames[i] + " header");
  }
  const std::string& node_id = *h.value[kNode];
  const std::string& nonce = *h.value[kNonce];
  const std::string& signature = *h.value[kSignature];
  const std::string* presented_key = h.value[kKey];
  if (!valid_node_id(node_id)) return refuse(AuthStatus::Malformed, std::string(kNodeHeader) + " is not node-<32 hex>");
  if (presented_key && !is_lower_hex(*presented_key, 64))
    return refuse(AuthStatus::Malformed, std::string(kKeyHeader) + " is not 64 lowercase hex digits");
  const auto timestamp = parse_timestamp(*h.value[kTimestamp]);
  if (!timestamp) return refuse(AuthStatus::Malformed, std::string(kTimestampHeader) + " is not Unix milliseconds");
  if (!is_lower_hex(nonce, 32)) return refuse(AuthStatus::Malformed, std::string(kNonceHeader) + " is not 32 lowercase hex digits");
  if (!is_lower_hex(signature, 128))
    return refuse(AuthStatus::Malformed, std::string(kSignatureHeader) + " is not 128 lowercase hex digits");
  if (!valid_method(method)) return refuse(AuthStatus::Malformed, "the method is not upper-case letters");
  if (!valid_target(target)) return refuse(AuthStatus::Malformed, "the request target is not an origin-form path");

  // 2. Which key speaks for this id: the id must derive from any key presented, and a
  //    registered node must present (if anything) the key it registered.
  const std::string who = "node " + node_id;
  if (presented_key && node_id_for_public_key(*presented_key) != node_id)
    return refuse(AuthStatus::KeyMismatch, who + ": the id does not derive from the key in " + kKeyHeader);
  std::optional<std::string> registered;
  try {
    registered = lookup(node_id);
  } catch (const std::exception& e) {
    return refuse(AuthStatus::Unavailable, who + ": looking up the node's key failed: " + e.what());
  }
  AuthResult ok;
  if (registered) {
    if (presented_key && !iequals(*presented_key, *registered))
      return refuse(AuthStatus::KeyMismatch, who + ": the key in " + kKeyHeader + " is not the registered one");
    ok.public_key_hex = *registered;
  } else if (options.allow_unregistered && presented_key) {
    ok.public_key_hex = *presented_key;
    ok.registering = true;
  } else {
    return refuse(AuthStatus::UnknownNode, who + " is not registered");
  }

  // 3. Fresh: inside the skew window either way (a node's clock may run ahead).
  const int64_t skew = now_ms - *timestamp;
  if (skew > options.max_skew_ms || -skew > options.max_skew_ms)
    return refuse(AuthStatus::Stale, who + ": the timestamp is " + std::to_string(skew >= 0 ? skew : -skew) + " ms in the " +
                                         (skew >= 0 ? "past" : "future") + " (window ±" +
                                         std::to_string(options.max_skew_ms) + " ms)");

  // 4. Signed by that key over exactly this request.
  const std::string message =
      canonical_request(node_id, method, target, sha256_hex(std::string(body)), *timestamp, nonce);
  if (!verify_node_signature(ok.public_key_hex, message, signature))
    return refuse(AuthStatus::BadSignature, who + ": the signature does not verify for this request");

  // 5. Not seen before. Only now, so unauthenticated traffic cannot fill the guard.
  try {
    if (!nonces.remember(node_id, nonce, *timestamp + options.max_skew_ms, now_ms))
      return refuse(AuthStatus::Replayed, who + ": nonce already used (a replayed request)");
  } catch (const std::exception& e) {
    return refuse(AuthStatus::Unavailable, who + ": the replay guard failed: " + e.what());
  }
  ok.status = AuthStatus::Ok;
  ok.node_id = node_id;
  ok.reason = "signed by " + node_id;
  return ok;
}

}  // namespace

std::string canonical_request(std::string_view node_id, std::string_view method, std::string_view target,
                              std::string_view body_sha256_hex, int64_t timestamp_ms, std::string_view nonce) {
  if (!valid_node_id(node_id)) throw Error("signing a request: '" + std::string(node_id) + "' is not a node id");
  if (!valid_method(method)) throw Error("signing a request: method '" + std::string(method) + "' is not upper-case letters");
  if (!valid_target(target))
    throw Error("signing a request: target '" + std::string(target) + "' is not an origin-form path without spaces");
  if (!is_lower_hex(body_sha256_hex, 64)) throw Error("signing a request: the body hash is not 64 lowercase hex digits");
  if (timestamp_ms < 0) throw Error("signing a request: negative timestamp");
  if (!is_lower_hex(nonce, 32)) throw Error("signing a request: the nonce is not 32 lowercase hex digits");
  std::string s = kVersionLine;
  for (std::string_view field : {node_id, method, target, body_sha256_hex}) {
    s += '\n';
    s += field;
  }
  s += '\n';
  s += std::to_string(timestamp_ms);
  s += '\n';
  s += nonce;
  return s;
}

Headers sign_request(const NodeIdentity& identity, std::string_view method, std::string_view target,
                     std::string_view body, int64_t now_ms) {
  const std::string nonce = random_hex(16);
  const std::string message =
      canonical_request(identity.id(), method, target, sha256_hex(std::string(body)), now_ms, nonce);
  return {{kNodeHeader, identity.id()},
          {kKeyHeader, identity.public_key_hex()},
          {kTimestampHeader, std::to_string(now_ms)},
          {kNonceHeader, nonce},
          {kSignatureHeader, identity.sign(message)}};
}

const char* to_string(AuthStatus s) {
  switch (s) {
    case AuthStatus::Ok: return "ok";
    case AuthStatus::MissingHeader: return "missing header";
    case AuthStatus::Malformed: return "malformed";
    case AuthStatus::UnknownNode: return "unknown node";
    case AuthStatus::KeyMismatch: return "node id does not match key";
    case AuthStatus::BadSignature: return "bad signature";
    case AuthStatus::Stale: return "stale";
    case AuthStatus::Replayed: return "replayed";
    case AuthStatus::Unavailable: return "unavailable";
  }
  return "unknown";
}

AuthResult verify_request(const Headers& headers, std::string_view method, std::string_view target,
                          std::string_view body, int64_t now_ms, const KeyLookup& lookup, NonceStore& nonces,
                          const VerifyOptions& options) noexcept {
  // Anything still thrown (out of memory) is a refusal too: a request is never let through by
  // an exception, and the server never dies of one.
  try {
    return verify_unguarded(headers, method, target, body, now_ms, lookup, nonces, options);
  } catch (const std::exception& e) {
    AuthResult r;
    r.status = AuthStatus::Unavailable;
    r.reason = std::string("verifying the request failed: ") + e.what();
    return r;
  } catch (...) {
    AuthResult r;
    r.status = AuthStatus::Unavailable;
    r.reason = "verifying the request failed";
    return r;
  }
}

}  // namespace orchard::protocol
