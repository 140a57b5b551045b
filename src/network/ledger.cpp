#include "network/ledger.h"

#include "platform/wall_clock.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr const char* kLedgerFormat = "orchard-ledger";
constexpr const char* kLedgerVersion = "1";

// The schema. Entries and signed heads are append-only: the triggers make an UPDATE or DELETE
// fail inside the database, whoever issues it; verify() checks they are still there.
constexpr const char* kLedgerSchema = R"sql(
CREATE TABLE IF NOT EXISTS accounts(name TEXT PRIMARY KEY, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entries(
  seq INTEGER PRIMARY KEY,
  job_id TEXT NOT NULL UNIQUE,
  attempt INTEGER NOT NULL,
  payer TEXT NOT NULL,
  payee TEXT NOT NULL,
  amount INTEGER NOT NULL,
  details TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_payer ON entries(payer);
CREATE INDEX IF NOT EXISTS entries_payee ON entries(payee);
CREATE TABLE IF NOT EXISTS signed_heads(
  id INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL,
  hash TEXT NOT NULL,
  public_key TEXT NOT NULL,
  signature TEXT NOT NULL,
  signed_at INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS entries_no_update BEFORE UPDATE ON entries
  BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_no_delete BEFORE DELETE ON entries
  BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER IF NOT EXISTS signed_heads_no_update BEFORE UPDATE ON signed_heads
  BEGIN SELECT RAISE(ABORT, 'signed heads are append-only'); END;
CREATE TRIGGER IF NOT EXISTS signed_heads_no_delete BEFORE DELETE ON signed_heads
  BEGIN SELECT RAISE(ABORT, 'signed heads are append-only'); END;
)sql";

// PostgreSQL's: the same tables, its own trigger syntax, and TRUNCATE refused too (it skips
// row triggers).
constexpr const char* kPostgresSchema = R"sql(
CREATE TABLE accounts(name TEXT PRIMARY KEY, created_at BIGINT NOT NULL);
CREATE TABLE entries(
  seq BIGINT PRIMARY KEY,
  job_id TEXT NOT NULL UNIQUE,
  attempt BIGINT NOT NULL,
  payer TEXT NOT NULL,
  payee TEXT NOT NULL,
  amount BIGINT NOT NULL,
  details TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL);
CREATE INDEX entries_payer ON entries(payer);
CREATE INDEX entries_payee ON entries(payee);
CREATE TABLE signed_heads(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  seq BIGINT NOT NULL,
  hash TEXT NOT NULL,
  public_key TEXT NOT NULL,
  signature TEXT NOT NULL,
  signed_at BIGINT NOT NULL);
CREATE FUNCTION append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION '% are append-only', TG_ARGV[0]; END $$;
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
  FOR EACH ROW EXECUTE FUNCTION append_only('ledger entries');
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
  FOR EACH ROW EXECUTE FUNCTION append_only('ledger entries');
CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON entries
  FOR EACH STATEMENT EXECUTE FUNCTION append_only('ledger entries');
CREATE TRIGGER signed_heads_no_update BEFORE UPDATE ON signed_heads
  FOR EACH ROW EXECUTE FUNCTION append_only('signed heads');
CREATE TRIGGER signed_heads_no_delete BEFORE DELETE ON signed_heads
  FOR EACH ROW EXECUTE FUNCTION append_only('signed heads');
CREATE TRIGGER signed_heads_no_truncate BEFORE TRUNCATE ON signed_heads
  FOR EACH STATEMENT EXECUTE FUNCTION append_only('signed heads');
)sql";

constexpr const char* kEntryColumns =
    "seq, job_id, attempt, payer, payee, amount, details, created_at, prev_hash, hash";

std::string select_entries(const char* where) {
  return std::string("SELECT ") + kEntryColumns + " FROM entries " + where;
}

std::vector<Entry> read_entries(sql::Stmt& s) {
  std::vector<Entry> out;
  while (s.step()) out.push_back(read_entry(s));
  return out;
}

}  // namespace

Entry read_entry(const sql::Stmt& s) {
  Entry e;
  e.seq = s.i64(0);
  e.job_id = s.text(1);
  e.attempt = s.i64(2);
  e.payer = s.text(3);
  e.payee = s.text(4);
  e.amount = s.i64(5);
  e.details = s.text(6);
  e.created_at = s.i64(7);
  e.prev_hash = s.text(8);
  e.hash = s.text(9);
  return e;
}

Ledger Ledger::open(const std::string& location) {
  return Ledger(sql::open_database(location, {"ledger", kLedgerFormat, kLedgerVersion, kLedgerSchema, kPostgresSchema}));
}

std::optional<Entry> Ledger::entry_for_job(const std::string& job_id) {
  sql::Stmt s(db(), select_entries("WHERE job_id = ?1"));
  s.bind(1, job_id);
  if (!s.step()) return std::nullopt;
  return read_entry(s);
}

PayResult Ledger::pay(const std::string& job_id, int64_t attempt, const std::string& payer, const std::string& payee,
                      int64_t amount, const nlohmann::json& details) {
  const std::string where = this->where() + ": paying job '" + job_id + "': ";
  if (job_id.empty()) throw Error(where + "the job id is empty");
  if (payer.empty() || payee.empty()) throw Error(where + "an account name is empty");
  if (payer == payee) throw Error(where + "payer and payee are the same account '" + payer + "'");
  if (amount <= 0) throw Error(where + "amount " + std::to_string(amount) + " is not positive");

  // The check for an earlier payment, the head we chain to and the insert all see one state: the
  // write transaction holds the ledger's write lock (database.h), so no other appender can slip
  // in between, and the head read is the newest.
  return db().write([&]() -> PayResult {
    if (auto existing = entry_for_job(job_id)) return {*existing, false};
    return {append(job_id, attempt, payer, payee, amount, details), true};
  });
}

PayResult grant_credits(Ledger& ledger, const std::string& account, int64_t micro, const std::string& note) {
  if (account == kIssuer) throw Error("the issuing account '" + std::string(kIssuer) + "' cannot be granted credits");
  return ledger.pay("grant-" + random_hex(8), 0, kIssuer, account, micro, {{"grant", note}});
}

Entry Ledger::append(const std::string& job_id, int64_t attempt, const std::string& payer, const std::string& payee,
                     int64_t amount, const nlohmann::json& details) {
  Entry e;
  e.job_id = job_id;
  e.attempt = attempt;
  e.payer = payer;
  e.payee = payee;
  e.amount = amount;
  e.details = details.dump();
  e.created_at = platform::unix_time_ms();
  const Head h = head();
  e.seq = h.seq + 1;
  e.prev_hash = h.hash;
  e.hash = entry_hash(e);
  for (const std::string* account : {&payer, &payee}) {
    sql::Stmt a(db(), "INSERT INTO accounts(name, created_at) VALUES(?1, ?2) ON CONFLICT DO NOTHING");
    a.bind(1, *account).bind(2, e.created_at).step();
  }
  sql::Stmt ins(db(), "INSERT INTO entries(seq, job_id, attempt, payer, payee, amount, details, created_at, prev_hash, hash) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  ins.bind(1, e.seq).bind(2, e.job_id).bind(3, e.attempt).bind(4, e.payer).bind(5, e.payee).bind(6, e.amount);
  ins.bind(7, e.details).bind(8, e.created_at).bind(9, e.prev_hash).bind(10, e.hash);
  ins.step();
  return e;
}

int64_t Ledger::balance(const std::string& account) {
  sql::Stmt s(db(),
              "SELECT (SELECT coalesce(sum(amount), 0) FROM entries WHERE payee = ?1) - "
              "(SELECT coalesce(sum(amount), 0) FROM entries WHERE payer = ?1)");
  s.bind(1, account).step();
  return s.i64(0);
}

std::vector<Ledger::Earner> Ledger::top_earners(int64_t limit) {
  sql::Stmt s(db(),
              "SELECT payee, sum(amount), count(*) FROM entries WHERE job_id NOT LIKE 'grant-%' "
              "GROUP BY payee ORDER BY sum(amount) DESC, payee LIMIT ?1");
  s.bind(1, limit);
  std::vector<Earner> out;
  while (s.step()) out.push_back({s.text(0), s.i64(1), s.i64(2)});
  return out;
}

std::vector<Entry> Ledger::entries_for(const std::string& account) {
  sql::Stmt s(db(), select_entries("WHERE payer = ?1 OR payee = ?1 ORDER BY seq"));
  s.bind(1, account);
  return read_entries(s);
}

std::vector<Entry> Ledger::entries_range(int64_t from, int64_t to) {
  sql::Stmt s(db(), select_entries("WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq"));
  s.bind(1, from).bind(2, to);
  return read_entries(s);
}

std::vector<std::string> Ledger::accounts() {
  sql::Stmt s(db(), "SELECT name FROM accounts ORDER BY name");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

Head Ledger::head() {
  sql::Stmt s(db(), "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1");
  if (!s.step()) return {0, kZeroHash};
  return {s.i64(0), s.text(1)};
}

SignedHead Ledger::sign_head(EVP_PKEY* key) {
  if (!key || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) throw Error(where() + ": signing the head needs an Ed25519 key");
  return db().write([&] { return sign_head_in(key); });  // the head cannot move between reading and recording it
}

SignedHead Ledger::sign_head_in(EVP_PKEY* key) {
  SignedHead sh;
  const Head h = head();
  sh.seq = h.seq;
  sh.hash = h.hash;
  sh.public_key = public_key_hex(key);
  const std::string msg = head_message(sh.seq, sh.hash);
  unsigned char sig[64];
  size_t sig_len = sizeof sig;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
                  EVP_DigestSign(ctx, sig, &sig_len, reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw Error(where() + ": signing the head failed (OpenSSL)");
  sh.signature = to_hex(sig, sig_len);
  sh.signed_at = platform::unix_time_ms();
  sql::Stmt ins(db(), "INSERT INTO signed_heads(seq, hash, public_key, signature, signed_at) VALUES(?1, ?2, ?3, ?4, ?5)");
  ins.bind(1, sh.seq).bind(2, sh.hash).bind(3, sh.public_key).bind(4, sh.signature).bind(5, sh.signed_at).step();
  return sh;
}

std::optional<SignedHead> Ledger::latest_signed_head() {
  sql::Stmt s(db(), "SELECT seq, hash, public_key, signature, signed_at FROM signed_heads ORDER BY id DESC LIMIT 1");
  if (!s.step()) return std::nullopt;
  return SignedHead{s.i64(0), s.text(1), s.text(2), s.text(3), s.i64(4)};
}

}  // namespace orchard::network
