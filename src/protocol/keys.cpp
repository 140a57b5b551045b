#include "protocol/keys.h"

#include "protocol/ledger_entry.h"
#include "tensor/error.h"

namespace orchard::protocol {

KeyPtr generate_ed25519_key() {
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  const bool ok = ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &key) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) throw Error("generating an Ed25519 key failed (OpenSSL)");
  return KeyPtr(key);
}

std::string public_key_hex(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t n = sizeof raw;
  if (!key || EVP_PKEY_get_raw_public_key(key, raw, &n) != 1) throw Error("not an Ed25519 key");
  return to_hex(raw, n);
}

KeyPtr public_key_from_hex(const std::string& hex) {
  std::string raw;
  if (!from_hex(hex, raw) || raw.size() != 32) throw Error("Ed25519 public key '" + hex + "' is not 64 hex digits");
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                              reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  if (!key) throw Error("Ed25519 public key '" + hex + "' was refused by OpenSSL");
  return KeyPtr(key);
}

}  // namespace orchard::protocol
