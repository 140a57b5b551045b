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

namespace {

Mac hmac(const std::string& secret, const uint8_t* data, size_t size) {
  Mac out{};
  unsigned len = 0;
  static const uint8_t kEmptyKey = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmptyKey) : secret.data();
  if (!HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), data, size, out.data(), &len) || len != out.size())
    throw CommError("HMAC-SHA256 failed (OpenSSL)");
  return out;
}

std::string to_hex(const uint8_t* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) s += digits[data[i] >> 4], s += digits[data[i] & 15];
  return s;
}

}  // namespace

Mac auth_mac(const std::string& secret, char role, const Nonce& a, const Nonce& b, const std::string& context) {
  std::vector<uint8_t> msg;
  msg.push_back(static_cast<uint8_t>(role));
  msg.insert(msg.end(), a.begin(), a.end());
  msg.insert(msg.end(), b.begin(), b.end());
  msg.insert(msg.end(), context.begin(), context.end());
  return hmac(secret, msg.data(), msg.size());
}

bool macs_equal(const Mac& x, const Mac& y) { return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0; }

std::string hmac_hex(const std::string& secret, std::string_view text) {
  const Mac m = hmac(secret, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  return to_hex(m.data(), m.size());
}

bool hex_macs_equal(std::string_view x, std::string_view y) {
  return x.size() == y.size() && CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0;
}

std::string random_hex(size_t bytes) {
  std::vector<uint8_t> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) throw CommError("cannot draw random bytes (OpenSSL)");
  return to_hex(raw.data(), raw.size());
}

}  // namespace orchard::dist::net
