#pragma once
// Random tokens for anything an attacker must not guess (nonces, API keys, temp names), drawn
// from OpenSSL's CSPRNG rather than <random>, whose engines are predictable from their output.
#include <cstddef>
#include <string>

namespace orchard::protocol {

// `bytes` random bytes as 2 × `bytes` lowercase hex digits. Throws orchard::Error when the
// generator fails (it is not seeded), never returns a weak value.
std::string random_hex(size_t bytes);

}  // namespace orchard::protocol
