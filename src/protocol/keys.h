#pragma once
// Ed25519 keys (OpenSSL) as both sides of the network hold them: a node's identity, the
// coordinator's ledger-signing key, and a public half travelling as 64 hex digits.
#include <openssl/evp.h>

#include <memory>
#include <string>

namespace orchard::protocol {

// A fresh key pair, and a key's raw public half as hex / back.
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;
KeyPtr generate_ed25519_key();
std::string public_key_hex(EVP_PKEY* key);
KeyPtr public_key_from_hex(const std::string& hex);  // throws orchard::Error when malformed

}  // namespace orchard::protocol
