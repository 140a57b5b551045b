#pragma once
// What an owner checks about the coordinator's ledger without trusting the coordinator: that
// the head it signed is signed by the coordinator's key, and that the owner's entries are in
// the chain below that head, unaltered.
//
// The ledger is a plain hash chain (each entry's hash covers its fields and the previous hash),
// so there is no proof shorter than the chain itself: the owner re-hashes every entry from its
// own first one (or from the last head it verified, its anchor) up to the signed head. The
// segment therefore shows other accounts' payments in that span too; the ledger is as public
// as /v1/world. A Merkle tree over the entries would give log-size proofs that reveal nothing
// else, at the price of a new signed message; not built.
//
// Why re-hashing from the owner's first entry is enough: the signature pins the head's hash,
// which (SHA-256) pins every field of every entry it chains back to, including the owner's.
// What came before the first re-hashed entry does not matter for inclusion. With an anchor,
// the segment must start right after it and link to its hash, so an entry verified last time
// can no longer be rewritten or dropped without the next check failing.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "protocol/ledger_entry.h"

namespace orchard::protocol {

// The coordinator's public ledger endpoints (docs/network-protocol.md, "Ledger").
inline constexpr const char* kLedgerKeyPath = "/v1/ledger/key";          // its signing key
inline constexpr const char* kLedgerHeadPath = "/v1/ledger/head";        // the latest signed head
inline constexpr const char* kLedgerEntriesPath = "/v1/ledger/entries";  // ?account=A&after=SEQ
inline constexpr const char* kLedgerChainPath = "/v1/ledger/chain";      // ?from=A&to=B

nlohmann::json to_json(const Entry& e);
nlohmann::json to_json(const SignedHead& h);
// Throw orchard::Error naming the field when `j` is not an entry / a signed head.
Entry entry_from_json(const nlohmann::json& j);
SignedHead signed_head_from_json(const nlohmann::json& j);

// What the coordinator served an owner.
struct OwnerProof {
  SignedHead head;
  std::vector<Entry> listed;  // the account's entries, as the coordinator lists them
  std::vector<Entry> chain;   // every entry from the start seq to head.seq, in order
  std::optional<Head> anchor; // the head this owner verified last time, if any
};

struct OwnerCheck {
  std::vector<std::string> violations;  // each names the seq or field it concerns
  int64_t verified = 0;  // the account's entries re-hashed under the signed head now
  int64_t earlier = 0;   // the account's entries at or before the anchor (verified before)
  int64_t pending = 0;   // the account's entries newer than the signed head (not signed yet)
  bool ok() const { return violations.empty(); }
};

// The seq the chain segment must start at: right after the anchor, else the account's first
// listed entry (head.seq + 1 when there is none under the head: nothing to re-hash).
int64_t proof_start(const SignedHead& head, const std::vector<Entry>& listed, const std::optional<Head>& anchor);

// Checks `proof` for `account` against `trusted_key_hex` (64 hex digits, raw Ed25519): the
// head's key and signature; the segment contiguous from proof_start(), each hash recomputed,
// each link, ending at the signed (seq, hash); each listed entry under the head identical to
// the chain's entry at its seq; no entry of the account in the chain left out of the list.
// Never throws: a malformed proof is a violation.
OwnerCheck check_owner_proof(const OwnerProof& proof, const std::string& trusted_key_hex, const std::string& account);

}  // namespace orchard::protocol
