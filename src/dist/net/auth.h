#pragma once
// Challenge-response on every connection: both sides prove they know the
// cluster secret (HMAC-SHA256 over fresh nonces) before any data moves.
// With no secret the same exchange runs with an empty key, which only checks
// that both ends speak the same protocol and belong to the same job.
#include <array>
#include <cstdint>
#include <string>

namespace orchard::dist::net {

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

Nonce random_nonce();
// HMAC-SHA256(secret, role || a || b || context)
Mac auth_mac(const std::string& secret, char role, const Nonce& a, const Nonce& b, const std::string& context);
bool macs_equal(const Mac& x, const Mac& y);

}  // namespace orchard::dist::net
