#pragma once
// A credit-ledger entry and signed head as both the coordinator (network/ledger.h) and an owner
// checking it (ledger_proof.h) see them; the canonical encoding an entry's hash covers, and the
// message a head signature covers. Each field is written as <decimal byte length> ':' <bytes> ',' after a version tag, so no two
// different entries encode to the same bytes (no field can swallow its neighbour).
#include <cstdint>
#include <string>

namespace orchard::protocol {

struct Entry {
  int64_t seq = 0;  // 1, 2, 3, … in chain order
  std::string job_id;
  int64_t attempt = 0;
  std::string payer;   // client account, debited
  std::string payee;   // owner account, credited
  int64_t amount = 0;  // micro-credits, > 0
  std::string details; // JSON text (tokens, model class, hardware, dedicated)
  int64_t created_at = 0;  // Unix milliseconds
  std::string prev_hash;   // hex; 64 zeros for seq 1
  std::string hash;        // hex SHA-256 (entry_hash below)
};

struct Head {
  int64_t seq = 0;    // 0 for an empty ledger
  std::string hash;   // hex; 64 zeros for an empty ledger
};

struct SignedHead {
  int64_t seq = 0;
  std::string hash;
  std::string public_key;  // hex, raw Ed25519 (32 bytes)
  std::string signature;   // hex (64 bytes)
  int64_t signed_at = 0;   // Unix milliseconds
};

inline const std::string kZeroHash(64, '0');

std::string sha256_hex(const std::string& bytes);
// SHA-256 hex of seq, job_id, attempt, payer, payee, amount, details, created_at, prev_hash.
std::string entry_hash(const Entry& e);
// "orchard-ledger-head-v1" seq hash, encoded as above.
std::string head_message(int64_t seq, const std::string& hash);

std::string to_hex(const unsigned char* p, size_t n);
// False when `hex` is not an even-length hex string.
bool from_hex(const std::string& hex, std::string& out);

}  // namespace orchard::protocol
