#pragma once
// An owner's check of the coordinator's ledger (`orchard node status`): fetch the latest signed
// head, the account's entries and the chain from them to the head, and check them locally with
// protocol::check_owner_proof against the coordinator's key — pinned on first use, or given.
//
// The pin file remembers the key and the last head verified for the account (the anchor), so
// the next check re-hashes only what was appended since, and a coordinator that rewrote an
// entry verified before, or switched keys, fails it.
#include <filesystem>
#include <optional>
#include <string>

#include "protocol/ledger_proof.h"

namespace orchard::node {

struct LedgerCheckOptions {
  std::string coordinator;  // http://host:port or https://
  std::string ca_cert;      // https: the coordinator's certificate or CA (PEM); empty: the system's
  std::string account;      // the owner whose entries are checked
  std::string trusted_key;  // 64 hex digits; empty: the pinned key, or pin the served one
  std::filesystem::path pin_file;
};

struct LedgerCheckResult {
  std::optional<protocol::SignedHead> head;  // none: the coordinator has signed no head yet
  protocol::OwnerCheck check;
  std::string key;          // the key the head was checked against
  bool pinned_now = false;  // the key was taken from the coordinator and pinned on this first use
};

// Throws orchard::Error when the coordinator cannot be reached or answers malformed JSON, or the
// pin file is unreadable; a failed check is a result with violations (and leaves the pin as it
// was). A passing check records its head in the pin file as the next check's anchor.
LedgerCheckResult check_owner_ledger(const LedgerCheckOptions& o);

}  // namespace orchard::node
