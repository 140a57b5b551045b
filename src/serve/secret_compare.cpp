#include "serve/secret_compare.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace orchard::serve {
namespace {

bool digest(std::string_view s, unsigned char (&out)[EVP_MAX_MD_SIZE], unsigned int& n) {
  return EVP_Digest(s.data(), s.size(), out, &n, EVP_sha256(), nullptr) == 1;
}

}  // namespace

bool same_secret(std::string_view presented, std::string_view expected) {
  unsigned char a[EVP_MAX_MD_SIZE], b[EVP_MAX_MD_SIZE];
  unsigned int na = 0, nb = 0;
  if (!digest(presented, a, na) || !digest(expected, b, nb) || na != nb) return false;  // refuse when hashing fails
  return CRYPTO_memcmp(a, b, na) == 0;
}

}  // namespace orchard::serve
