#pragma once
// The canonical encoding an entry's hash covers, and the message a head signature covers.
// Each field is written as <decimal byte length> ':' <bytes> ',' after a version tag, so no two
// different entries encode to the same bytes (no field can swallow its neighbour).
#include <cstdint>
#include <string>

#include "network/database.h"
#include "network/ledger.h"

namespace orchard::network {

inline const std::string kZeroHash(64, '0');

std::string sha256_hex(const std::string& bytes);
// SHA-256 hex of seq, job_id, attempt, payer, payee, amount, details, created_at, prev_hash.
std::string entry_hash(const Entry& e);
// "orchard-ledger-head-v1" seq hash, encoded as above.
std::string head_message(int64_t seq, const std::string& hash);

// An entry from a row of `SELECT seq, job_id, attempt, payer, payee, amount, details,
// created_at, prev_hash, hash` (ledger.cpp), for the ledger and its verifier.
Entry read_entry(const sql::Stmt& s);

std::string to_hex(const unsigned char* p, size_t n);
// False when `hex` is not an even-length hex string.
bool from_hex(const std::string& hex, std::string& out);

}  // namespace orchard::network
