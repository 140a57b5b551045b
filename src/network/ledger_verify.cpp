// Ledger::verify and the head-signature checks: everything someone with raw write access to
// the file could break, re-derived from the entries themselves.
#include <map>
#include <set>

#include "network/ledger.h"
#include "network/protocol_names.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

bool signature_valid(const SignedHead& sh, EVP_PKEY* key) {
  std::string sig;
  if (!from_hex(sh.signature, sig)) return false;
  const std::string msg = head_message(sh.seq, sh.hash);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                                   reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// The stored hash of entry `seq` (empty when there is none).
std::string chain_hash_at(sql::Connection& db, int64_t seq) {
  if (seq == 0) return kZeroHash;
  sql::Stmt s(db, "SELECT hash FROM entries WHERE seq = ?1");
  s.bind(1, seq);
  return s.step() ? s.text(0) : std::string();
}

// Why the signed head `sh` fails against `key` and the chain; empty when it holds.
std::string head_problem(sql::Connection& db, const SignedHead& sh, EVP_PKEY* key) {
  const std::string at = "signed head at seq " + std::to_string(sh.seq);
  if (!signature_valid(sh, key)) return at + ": signature does not verify";
  const std::string stored = chain_hash_at(db, sh.seq);
  if (stored.empty()) return at + ": the chain has no entry " + std::to_string(sh.seq);
  if (stored != sh.hash) return at + ": does not match the chain (entry " + std::to_string(sh.seq) + " has another hash)";
  return {};
}

// The append-only triggers; PostgreSQL has TRUNCATE ones too (TRUNCATE skips row triggers).
std::vector<std::string> triggers(sql::Dialect d) {
  std::vector<std::string> out;
  for (const char* table : {"entries", "signed_heads"})
    for (const char* op : {"update", "delete", "truncate"})
      if (d == sql::Dialect::PostgreSQL || std::string(op) != "truncate")
        out.push_back(std::string(table) + "_no_" + op);
  return out;
}

// How many enabled triggers named `name` the ledger has.
int64_t trigger_count(sql::Connection& db, const std::string& name) {
  sql::Stmt s(db, db.dialect() == sql::Dialect::SQLite
                      ? "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = ?1"
                      : "SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND t.tgname = ?1 AND t.tgenabled <> 'D'");
  s.bind(1, name).step();
  return s.i64(0);
}

}  // namespace

bool Ledger::verify_head_signature(EVP_PKEY* public_key, std::string* why) {
  auto fail = [&](const std::string& m) {
    if (why) *why = m;
    return false;
  };
  try {
    const auto sh = latest_signed_head();
    if (!sh) return fail("the ledger has no signed head");
    if (!public_key) return fail("no public key given");
    if (sh->public_key != public_key_hex(public_key))
      return fail("signed head at seq " + std::to_string(sh->seq) + " was signed by another key");
    const std::string problem = head_problem(db(), *sh, public_key);
    if (!problem.empty()) return fail(problem);
    return true;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

VerifyReport Ledger::verify(EVP_PKEY* trusted_key) {
  VerifyReport r;
  auto add = [&](std::string v) { r.violations.push_back(std::move(v)); };
  try {
    // One read transaction: every query below sees the same snapshot, even while others write.
    db().read([&] {
      r = VerifyReport{};  // a transaction run again starts over
      verify_in(r, trusted_key);
    });
  } catch (const std::exception& e) {
    add(std::string("cannot read the ledger: ") + e.what());
  }
  return r;
}

void Ledger::verify_in(VerifyReport& r, EVP_PKEY* trusted_key) {
  auto add = [&](std::string v) { r.violations.push_back(std::move(v)); };
  for (const std::string& name : triggers(db().dialect()))
    if (trigger_count(db(), name) != 1) add("append-only trigger '" + name + "' is missing");

  // The chain, in seq order: each link, each hash, each amount, each job once. (A PostgreSQL
  // amount is a BIGINT by its column type; an SQLite one could be stored as anything.)
  sql::Stmt s(db(), std::string("SELECT seq, job_id, attempt, payer, payee, amount, details, created_at, prev_hash, hash, ") +
                        (db().dialect() == sql::Dialect::SQLite ? "typeof(amount)" : "'integer'") +
                        " FROM entries ORDER BY seq");
  std::map<std::string, int64_t> first_seq_of_job;
  std::map<std::string, __int128> balances;
  int64_t prev_seq = 0;
  std::string prev_hash = kZeroHash;
  while (s.step()) {
    const Entry e = read_entry(s);
    const std::string at = "seq " + std::to_string(e.seq);
    ++r.entries;
    if (e.seq != prev_seq + 1)
      add("chain broken at " + at + ": entries " + std::to_string(prev_seq + 1) + ".." + std::to_string(e.seq - 1) +
          " are missing");
    if (e.prev_hash != prev_hash) add("chain broken at " + at + ": prev_hash does not match the hash of seq " + std::to_string(prev_seq));
    if (entry_hash(e) != e.hash) add("hash mismatch at " + at + ": the stored hash does not match the entry's fields");
    if (s.text(10) != "integer") add("amount not an integer at " + at);
    else if (e.amount <= 0) add("amount not positive at " + at + ": " + std::to_string(e.amount));
    if (e.payer.empty() || e.payee.empty()) add("empty account at " + at);
    else if (e.payer == e.payee) add("payer is payee at " + at + ": '" + e.payer + "'");
    if (auto [it, fresh] = first_seq_of_job.emplace(e.job_id, e.seq); !fresh)
      add("duplicate job '" + e.job_id + "' at " + at + " (first paid at seq " + std::to_string(it->second) + ")");
    balances[e.payer] -= e.amount;
    balances[e.payee] += e.amount;
    prev_seq = e.seq;
    prev_hash = e.hash;
  }

  // Double entry: every debit is someone's credit.
  __int128 total = 0;
  for (const auto& [account, b] : balances) total += b;
  if (total != 0) add("balances do not sum to zero");

  // Signed heads: each signature, each head still in the chain, each by the trusted key.
  sql::Stmt h(db(), "SELECT seq, hash, public_key, signature, signed_at FROM signed_heads ORDER BY id");
  while (h.step()) {
    const SignedHead sh{h.i64(0), h.text(1), h.text(2), h.text(3), h.i64(4)};
    ++r.signed_heads;
    const std::string at = "signed head at seq " + std::to_string(sh.seq);
    KeyPtr key;
    try {
      key = public_key_from_hex(sh.public_key);
    } catch (const Error&) {
      add(at + ": malformed public key");
      continue;
    }
    if (trusted_key && sh.public_key != public_key_hex(trusted_key)) add(at + ": signed by another key");
    const std::string problem = head_problem(db(), sh, key.get());
    if (!problem.empty()) add(problem);
  }
}

}  // namespace orchard::network
