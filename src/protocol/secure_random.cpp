#include "protocol/secure_random.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <vector>

#include "protocol/ledger_entry.h"
#include "tensor/error.h"

namespace orchard::protocol {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    throw Error("the random number generator failed (OpenSSL RAND_bytes)");
  std::string hex = to_hex(raw.data(), raw.size());
  OPENSSL_cleanse(raw.data(), raw.size());
  return hex;
}

}  // namespace orchard::protocol
