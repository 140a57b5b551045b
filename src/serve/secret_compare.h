#pragma once
// Comparing a presented secret (an API key) with the expected one without the time depending on
// where they first differ: both are hashed (SHA-256) and the digests compared with OpenSSL's
// CRYPTO_memcmp, so neither the content nor, beyond hashing time, the length leaks.
#include <string_view>

namespace orchard::serve {

bool same_secret(std::string_view presented, std::string_view expected);

}  // namespace orchard::serve
