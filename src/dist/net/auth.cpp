#include "dist/net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "dist/group.h"

namespace orchard::dist::net {

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) throw CommError("cannot draw a random nonce (OpenSSL)");
  return n;
}

Mac auth_mac(const std::string& secret, char role, const Nonce& a, const Nonce& b, const std::string& context) {
  std::vector<uint8_t> msg;
  msg.push_back(static_cast<uint8_t>(role));
  msg.insert(msg.end(), a.begin(), a.end());
  msg.insert(msg.end(), b.begin(), b.end());
  msg.insert(msg.end(), context.begin(), context.end());
  Mac out{};
  unsigned len = 0;
  static const uint8_t kEmptyKey = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmptyKey) : secret.data();
  if (!HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), msg.data(), msg.size(), out.data(), &len) ||
      len != out.size())
    throw CommError("HMAC-SHA256 failed (OpenSSL)");
  return out;
}

bool macs_equal(const Mac& x, const Mac& y) { return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0; }

}  // namespace orchard::dist::net
