#pragma once
// A node's identity: one Ed25519 key pair, made on the node's first start and kept in a PEM
// file, and the node id derived from its public half.
//
// The id is a name for the key, not a secret: "node-" + the first 16 bytes (32 hex digits) of
// SHA-256 over the raw 32-byte public key. Anyone holding the public key can recompute it, so
// the coordinator checks that a claimed id belongs to the key it was registered with, and a
// node cannot pick an id that collides with another node's without a 128-bit preimage.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/keys.h"

namespace orchard::protocol {

class NodeIdentity {
 public:
  // Loads the private key from `path`, or, when no file is there, makes a fresh key and writes
  // it: a temp file (mode 0600) beside it, fsync, then linked into place, so the key is never
  // half-written and two processes starting at once end up with the same one (the second
  // loads the first's). Parent directories are created. A file that exists but is unreadable,
  // not PEM, encrypted or not an Ed25519 key is an orchard::Error naming the path: the node's
  // identity is never silently replaced.
  static NodeIdentity load_or_create(const std::filesystem::path& path);
  // An identity for a key already in memory (tests, tools); nothing is written.
  static NodeIdentity from_key(KeyPtr key);

  const std::string& id() const { return id_; }
  const std::string& public_key_hex() const { return public_key_hex_; }
  // Ed25519 signature of `message`, as 128 hex digits.
  std::string sign(std::string_view message) const;
  EVP_PKEY* key() const { return key_.get(); }

 private:
  explicit NodeIdentity(KeyPtr key);
  KeyPtr key_;
  std::string public_key_hex_;
  std::string id_;
};

// The node id of a raw Ed25519 public key given as 64 hex digits; nullopt when `public_key_hex`
// is not that (it never throws: the input may come straight off the network).
std::optional<std::string> node_id_for_public_key(std::string_view public_key_hex);

// True when `signature_hex` (128 hex digits) is a valid Ed25519 signature of `message` by the
// key `public_key_hex`. Malformed input is simply false.
bool verify_node_signature(std::string_view public_key_hex, std::string_view message,
                           std::string_view signature_hex) noexcept;

}  // namespace orchard::protocol
