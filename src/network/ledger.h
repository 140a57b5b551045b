#pragma once
// The credit ledger: append-only, hash-chained, double-entry, in an SQLite file or a
// PostgreSQL database (database.h).
//
// Every entry is one job's payment: the client (payer) is debited and the node owner (payee)
// credited the same amount, so balances — derived from the entries, never stored — sum to zero.
// A job is paid exactly once: job_id is UNIQUE, and paying a job that is already paid returns
// the entry that paid it (a retry, a second attempt, a coordinator restarted mid-job).
//
// Entry N carries the hash of entry N-1 (prev_hash) and its own hash, SHA-256 over a canonical
// encoding of all its fields and prev_hash (protocol/ledger_entry.h). The coordinator signs the head
// (seq, hash) with Ed25519; a signed head pins every entry up to it, so an owner holding one
// can check that their entries are included and unaltered. Triggers refuse UPDATE and DELETE
// of entries and signed heads; verify() re-checks everything a writer with raw access could
// still break (drop the triggers, edit, recompute).
//
// Several processes may share one ledger; appending serializes on the ledger's write lock
// (SQLite: BEGIN IMMEDIATE on a WAL file with synchronous=FULL, so a committed payment survives
// SIGKILL and power loss; PostgreSQL: the store's advisory lock, database.h).
#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "network/database.h"
#include "network/protocol_names.h"

namespace orchard::network {

struct PayResult {
  Entry entry;
  bool inserted = false;  // false: the job was already paid, `entry` is that payment
};

struct VerifyReport {
  int64_t entries = 0;
  int64_t signed_heads = 0;
  std::vector<std::string> violations;  // each names the seq it concerns
  bool ok() const { return violations.empty(); }
};

class Ledger {
 public:
  // Opens (creating when absent or empty) the ledger at `location`: an SQLite file's path or a
  // PostgreSQL URL. Throws orchard::Error naming it when it cannot be opened or holds something
  // other than a ledger.
  static Ledger open(const std::string& location);

  // Pays job `job_id` once: one transaction appends the entry after the current head.
  // When the job is already paid (by this or another process), returns that entry with
  // inserted = false and changes nothing. Throws orchard::Error for an empty id or account,
  // payer == payee, or amount ≤ 0.
  PayResult pay(const std::string& job_id, int64_t attempt, const std::string& payer, const std::string& payee,
                int64_t amount, const nlohmann::json& details);

  // Credits minus debits of `account`, in micro-credits (0 for an unknown account).
  int64_t balance(const std::string& account);
  // Entries where `account` pays or is paid, in chain order.
  std::vector<Entry> entries_for(const std::string& account);
  // Entries with from ≤ seq ≤ to, in chain order (the segment an owner re-hashes to check
  // inclusion, ledger_proof.h).
  std::vector<Entry> entries_range(int64_t from, int64_t to);
  // The entry that paid `job_id`, if any.
  std::optional<Entry> entry_for_job(const std::string& job_id);
  std::vector<std::string> accounts();
  // What node owners earned from jobs (credit grants left out), most first: the world page's board.
  struct Earner {
    std::string account;
    int64_t earned = 0, jobs = 0;
  };
  std::vector<Earner> top_earners(int64_t limit);
  Head head();

  // Signs the current head with an Ed25519 private key and records it.
  SignedHead sign_head(EVP_PKEY* key);
  // The last recorded signed head, if any.
  std::optional<SignedHead> latest_signed_head();
  // True when the last signed head was signed by `public_key`, its signature verifies, and the
  // chain still holds that hash at that seq (entries may have been appended since). `why`, if
  // given, says what failed.
  bool verify_head_signature(EVP_PKEY* public_key, std::string* why = nullptr);

  // Checks every invariant over the whole file and lists each violation: seq gaps, broken
  // chain links, hash mismatches, amounts not positive, payer == payee, duplicate jobs,
  // balances not summing to zero, missing append-only triggers, signed heads whose signature
  // fails or that no longer match the chain. With `trusted_key`, signed heads by other keys
  // are violations too. Never throws for a tampered or corrupt file: that is a violation.
  VerifyReport verify(EVP_PKEY* trusted_key = nullptr);

  // The file's path or the URL (without a password), for messages.
  const std::string& where() const { return db_->name(); }

 private:
  explicit Ledger(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}
  // Inside pay()'s / sign_head()'s transaction.
  Entry append(const std::string& job_id, int64_t attempt, const std::string& payer, const std::string& payee,
               int64_t amount, const nlohmann::json& details);
  SignedHead sign_head_in(EVP_PKEY* key);
  void verify_in(VerifyReport& r, EVP_PKEY* trusted_key);
  sql::Connection& db() { return *db_; }
  std::unique_ptr<sql::Connection> db_;
};

// Credits a client can spend (the coordinator's --require-credit): an entry from the issuing
// account kIssuer to `account`, job id "grant-" + 16 random hex digits, details {"grant":
// note}. The issuer's balance goes as negative as all it issued, so balances still sum to zero.
inline constexpr const char* kIssuer = "network";
PayResult grant_credits(Ledger& ledger, const std::string& account, int64_t micro, const std::string& note);

// An entry from a row of `SELECT seq, job_id, attempt, payer, payee, amount, details,
// created_at, prev_hash, hash` (ledger.cpp), for the ledger and its verifier.
Entry read_entry(const sql::Stmt& s);

}  // namespace orchard::network
