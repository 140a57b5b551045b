#pragma once
// Challenge-response on every connection: both sides prove they know the
// cluster secret (HMAC-SHA256 over fresh nonces) before any data moves.
// With no secret the same exchange runs with an empty key, which only checks
// that both ends speak the same protocol and belong to the same job.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace orchard::dist::net {

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

Nonce random_nonce();
// HMAC-SHA256(secret, role || a || b || context)
Mac auth_mac(const std::string& secret, char role, const Nonce& a, const Nonce& b, const std::string& context);
bool macs_equal(const Mac& x, const Mac& y);

// HMAC-SHA256(secret, text) as 64 lowercase hex digits: what cluster announcements and the
// leader's orders carry (an empty secret is an empty key, as above).
std::string hmac_hex(const std::string& secret, std::string_view text);
// Compares two such strings in time independent of where they differ.
bool hex_macs_equal(std::string_view x, std::string_view y);
// `bytes` random bytes from OpenSSL as 2 × `bytes` hex digits (ids nobody may guess).
std::string random_hex(size_t bytes);

}  // namespace orchard::dist::net
