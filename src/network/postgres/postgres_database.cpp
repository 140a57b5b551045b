// The PostgreSQL backend (libpq): one database for all the stores of all coordinator replicas,
// each store in a schema of its own. A write transaction first takes its store's advisory lock,
// so writers of one store run one at a time, as SQLite's BEGIN IMMEDIATE makes them: each one
// reads (READ COMMITTED, after the lock) everything the writer before it committed, and acts
// as if it ran alone. Readers never wait. Measured against SERIALIZABLE with retries, the lock
// was several times faster on the claim-complete-pay mix of three replicas (conflicts on the
// attempts placement reads made most serializable claims retry).
#include <libpq-fe.h>

#include <mutex>
#include <unordered_map>

#include "network/database.h"

namespace orchard::network::sql {
namespace {

// `?N` → `$N` outside quoted text: the stores number their parameters SQLite's way.
std::string numbered_params(const std::string& sql) {
  std::string out;
  out.reserve(sql.size());
  char quote = 0;
  for (char ch : sql) {
    if (quote) {
      if (ch == quote) quote = 0;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
    } else if (ch == '?') {
      ch = '$';
    }
    out += ch;
  }
  return out;
}

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultFree>;

class PostgresConnection : public Connection {
 public:
  PostgresConnection(const std::string& url, std::string schema) : name_(without_password(url)), schema_(std::move(schema)) {
    conn_ = PQconnectdb(url.c_str());
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string msg = conn_ ? PQerrorMessage(conn_) : "out of memory";
      PQfinish(conn_);
      throw Error(name_ + ": cannot connect to PostgreSQL: " + trimmed(msg));
    }
    // NOTICEs ("schema … already exists, skipping") are not the operator's business.
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    custom_plans();
  }
  ~PostgresConnection() override { PQfinish(conn_); }

  Dialect dialect() const override { return Dialect::PostgreSQL; }
  void set_wait_for_disk(bool wait) override { exec(wait ? "SET synchronous_commit = on" : "SET synchronous_commit = off"); }
  const std::string& name() const override { return name_; }

  void exec(const std::string& sql) override {
    std::lock_guard lock(mu_);
    reconnect_if_lost();
    check(ResultPtr(PQexec(conn_, sql.c_str())), sql);
  }

  Result run(const std::string& sql, const std::vector<Param>& params) override {
    std::lock_guard lock(mu_);  // libpq: one command at a time on a connection
    reconnect_if_lost();
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      text[i] = p.kind == Param::Int ? std::to_string(p.i) : p.kind == Param::Real ? real_text(p.d) : p.s;
      values[i] = text[i].c_str();
    }
    const int n = static_cast<int>(params.size());
    const std::string* name = prepared(sql, n);
    ResultPtr res(name ? PQexecPrepared(conn_, name->c_str(), n, values.data(), nullptr, nullptr, 0)
                       : PQexecParams(conn_, numbered_params(sql).c_str(), n, nullptr, values.data(), nullptr, nullptr, 0));
    check(res, sql);
    Result r;
    const int rows = PQntuples(res.get()), cols = PQnfields(res.get());
    for (int i = 0; i < rows; ++i) {
      Row row(static_cast<size_t>(cols));
      for (int c = 0; c < cols; ++c)
        if (!PQgetisnull(res.get(), i, c)) {
          row[static_cast<size_t>(c)].kind = Value::Text;
          row[static_cast<size_t>(c)].s.assign(PQgetvalue(res.get(), i, c), static_cast<size_t>(PQgetlength(res.get(), i, c)));
        }
      r.rows.push_back(std::move(row));
    }
    const char* changed = PQcmdTuples(res.get());
    r.changes = changed && *changed ? std::strtoll(changed, nullptr, 10) : 0;
    return r;
  }

  // The store's schema, made when absent, first on the search path. Holds a session lock while
  // `then` runs, so replicas starting together do not both create the tables.
  template <class F>
  void in_own_schema(F then) {
    exec("SELECT pg_advisory_lock(hashtext('orchard: creating a store'))");
    try {
      exec("CREATE SCHEMA IF NOT EXISTS " + schema_);
      exec("SET search_path TO " + schema_);
      then();
    } catch (...) {
      unlock();
      throw;
    }
    unlock();
  }

 protected:
  void begin(bool write) override {
    if (!write) return exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    // One round trip for both; the lock is released by COMMIT/ROLLBACK.
    exec("BEGIN; SELECT pg_advisory_xact_lock(hashtext('" + schema_ + "'))");
  }
  void commit() override { exec("COMMIT"); }
  // A deadlock or serialization failure cannot come from two stores' writers (one lock each,
  // no transaction spans stores), but may from someone else's session on the same tables.
  int transaction_tries() const override { return 5; }
  void rollback() noexcept override {
    std::lock_guard lock(mu_);
    if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
  }

 private:
  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  static std::string real_text(double d) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }
  void unlock() noexcept {
    std::lock_guard lock(mu_);
    PQclear(PQexec(conn_, "SELECT pg_advisory_unlock_all()"));
  }

  // Prepared statements are planned for their parameters at every call: a generic plan does not
  // know that `seq > $1` asks for the last few of 100,000 rows, and scanned them all (a
  // placement pass went from 5 to 11 ms).
  void custom_plans() { PQclear(PQexec(conn_, "SET plan_cache_mode = force_custom_plan")); }

  // The statement prepared on this connection under a name of its own, once per text: parsed
  // once instead of at every call. Null (run it unprepared) past kMaxPrepared texts.
  const std::string* prepared(const std::string& sql, int n_params) {
    if (auto it = prepared_.find(sql); it != prepared_.end()) return &it->second;
    if (prepared_.size() >= kMaxPrepared) return nullptr;
    std::string name = "orchard_" + std::to_string(prepared_.size());
    check(ResultPtr(PQprepare(conn_, name.c_str(), numbered_params(sql).c_str(), n_params, nullptr)), sql);
    return &prepared_.emplace(sql, std::move(name)).first->second;
  }

  // A server restart or a dropped connection: connect again before the next transaction (not
  // inside one, whose work is gone with the old connection; that one fails to its caller).
  void reconnect_if_lost() {
    if (PQstatus(conn_) == CONNECTION_OK || in_transaction()) return;
    prepared_.clear();  // they were the old session's
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK)
      throw SqlError(name_ + ": lost the connection to PostgreSQL: " + trimmed(PQerrorMessage(conn_)), false);
    custom_plans();
    PQclear(PQexec(conn_, ("SET search_path TO " + schema_).c_str()));
  }

  void check(const ResultPtr& res, const std::string& sql) {
    const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    const char* state = res ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state ? state : "";
    // 40001 serialization_failure, 40P01 deadlock_detected: run the transaction again.
    const bool retry = code == "40001" || code == "40P01";
    const std::string msg = trimmed(res ? PQresultErrorMessage(res.get()) : PQerrorMessage(conn_));
    throw SqlError(name_ + ": " + msg + (retry ? "" : " (in: " + sql.substr(0, 200) + ")"), retry);
  }

  std::string name_, schema_;
  PGconn* conn_ = nullptr;
  std::unordered_map<std::string, std::string> prepared_;  // statement text → its name
  static constexpr size_t kMaxPrepared = 1024;
  std::mutex mu_;  // one command at a time (a transaction's callers keep theirs together)
};

}  // namespace

std::unique_ptr<Connection> open_postgres(const std::string& url, const FileKind& kind) {
  std::string schema = kind.format;  // "orchard-jobs" → orchard_jobs
  for (char& ch : schema)
    if (ch == '-') ch = '_';
  auto c = std::make_unique<PostgresConnection>(url, schema);
  c->in_own_schema([&] { create_or_check(*c, kind); });
  return c;
}

}  // namespace orchard::network::sql
