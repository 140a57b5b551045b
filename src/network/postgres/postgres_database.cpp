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
    session_settings();
  }
  ~PostgresConnection() override { PQfinish(conn_); }

  Dialect dialect() const override { return Dialect::PostgreSQL; }
  void set_wait_for_disk(bool wait) override { exec(wait ? "SET synchronous_commit = on" : "SET synchronous_commit = off"); }
  const std::string& name() const override { return name_; }

  void exec(const std::string& sql) override {
    std::lock_guard lock(mu_);
    flush_held();
    reconnect_if_lost();
    check(ResultPtr(PQexec(conn_, sql.c_str())), sql);
  }

  Result run(const std::string& sql, const std::vector<Param>& params) override {
    std::lock_guard lock(mu_);  // libpq: one command at a time on a connection
    if (!held_.empty()) {  // goes with what send() held back, in one round trip
      auto into = std::make_shared<std::optional<Result>>();
      held_.push_back({sql, params, into, false});
      flush_held();
      return std::move(**into);
    }
    reconnect_if_lost();
    const Texts t(params);
    const int n = static_cast<int>(params.size());
    const std::string* name = prepared(sql, n);
    ResultPtr res(name ? PQexecPrepared(conn_, name->c_str(), n, t.values.data(), nullptr, nullptr, 0)
                       : PQexecParams(conn_, numbered_params(sql).c_str(), n, nullptr, t.values.data(), nullptr, nullptr, 0));
    check(res, sql);
    return result_of(res.get());
  }

  void send(const std::string& sql, const std::vector<Param>& params, std::shared_ptr<std::optional<Result>> into) override {
    if (!in_transaction()) return Connection::send(sql, params, std::move(into));
    std::lock_guard lock(mu_);
    held_.push_back({sql, params, std::move(into), false});
  }

  void flush() override {
    std::lock_guard lock(mu_);
    flush_held();
  }

  void commit_lazily() override {
    if (!in_transaction()) return;
    std::lock_guard lock(mu_);
    held_.push_back({"SET LOCAL synchronous_commit = off", {}, nullptr, true});
  }

  // A generic plan, made once per statement and kept for the session, used only inside such
  // transactions (elsewhere custom plans, session_settings). With sequential scans off it
  // takes an index even when it was made while a table was small. (A table no index serves is
  // still scanned, costed at 10^10: harmless with JIT off, as sessions have it.)
  void plan_once() override {
    if (!in_transaction()) return;
    std::lock_guard lock(mu_);
    held_.push_back({"SET LOCAL plan_cache_mode = force_generic_plan", {}, nullptr, true});
    held_.push_back({"SET LOCAL enable_seqscan = off", {}, nullptr, true});
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
  // BEGIN (and a writer's lock) wait for the transaction's first statement and go with it: one
  // round trip fewer. Connecting again after a lost connection cannot wait: inside the
  // transaction it would not happen.
  void begin(bool write) override {
    std::lock_guard lock(mu_);
    reconnect_if_lost();
    held_.clear();
    begin_held_ = true;
    if (!write) {
      held_.push_back({"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", {}, nullptr, true});
      return;
    }
    held_.push_back({"BEGIN", {}, nullptr, true});
    // Released by COMMIT/ROLLBACK.
    held_.push_back({"SELECT pg_advisory_xact_lock(hashtext('" + schema_ + "'))", {}, nullptr, true});
  }
  void commit() override {
    std::lock_guard lock(mu_);
    held_.push_back({"COMMIT", {}, nullptr, true});
    flush_held();
  }
  // A deadlock or serialization failure cannot come from two stores' writers (one lock each,
  // no transaction spans stores), but may from someone else's session on the same tables.
  int transaction_tries() const override { return 5; }
  void rollback() noexcept override {
    std::lock_guard lock(mu_);
    held_.clear();
    // A BEGIN never sent began nothing to roll back.
    if (!begin_held_ && PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
    begin_held_ = false;
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
  // Parameters as the text libpq sends.
  struct Texts {
    explicit Texts(const std::vector<Param>& params) : text(params.size()), values(params.size()) {
      for (size_t i = 0; i < params.size(); ++i) {
        const Param& p = params[i];
        text[i] = p.kind == Param::Int ? std::to_string(p.i) : p.kind == Param::Real ? real_text(p.d) : p.s;
        values[i] = text[i].c_str();
      }
    }
    std::vector<std::string> text;
    std::vector<const char*> values;
  };

  static Result result_of(const PGresult* res) {
    Result r;
    const int rows = PQntuples(res), cols = PQnfields(res);
    for (int i = 0; i < rows; ++i) {
      Row row(static_cast<size_t>(cols));
      for (int c = 0; c < cols; ++c)
        if (!PQgetisnull(res, i, c)) {
          row[static_cast<size_t>(c)].kind = Value::Text;
          row[static_cast<size_t>(c)].s.assign(PQgetvalue(res, i, c), static_cast<size_t>(PQgetlength(res, i, c)));
        }
      r.rows.push_back(std::move(row));
    }
    const char* changed = PQcmdTuples(const_cast<PGresult*>(res));
    r.changes = changed && *changed ? std::strtoll(changed, nullptr, 10) : 0;
    return r;
  }

  // Sends every held statement in one pipeline and reads their answers in order. The server
  // runs them one after another and skips the rest after a failure (the transaction is then
  // lost anyway); the first failure is thrown once every answer is read, so the connection is
  // left ready for the ROLLBACK.
  void flush_held() {
    if (held_.empty()) return;
    std::vector<Held> batch;
    batch.swap(held_);
    begin_held_ = false;
    if (PQstatus(conn_) != CONNECTION_OK)
      throw SqlError(name_ + ": lost the connection to PostgreSQL: " + trimmed(PQerrorMessage(conn_)), false);
    if (PQenterPipelineMode(conn_) != 1) throw SqlError(name_ + ": cannot pipeline: " + trimmed(PQerrorMessage(conn_)), false);
    struct Sent {
      size_t held;
      std::string prepared;  // non-empty: the PQsendPrepare of this statement text
    };
    std::vector<Sent> sent;
    bool sending = true;
    for (size_t i = 0; i < batch.size() && sending; ++i) {
      const Held& h = batch[i];
      const Texts t(h.params);
      const int n = static_cast<int>(h.params.size());
      if (h.plain) {
        sending = PQsendQueryParams(conn_, h.sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
      } else {
        const std::string* name = nullptr;
        if (auto it = prepared_.find(h.sql); it != prepared_.end()) {
          name = &it->second;
        } else if (prepared_.size() < kMaxPrepared) {
          name = &prepared_.emplace(h.sql, "orchard_" + std::to_string(next_name_++)).first->second;
          sending = PQsendPrepare(conn_, name->c_str(), numbered_params(h.sql).c_str(), n, nullptr) == 1;
          sent.push_back({i, *name});
          if (!sending) break;
        }
        sending = name ? PQsendQueryPrepared(conn_, name->c_str(), n, t.values.data(), nullptr, nullptr, 0) == 1
                       : PQsendQueryParams(conn_, numbered_params(h.sql).c_str(), n, nullptr, t.values.data(), nullptr,
                                           nullptr, 0) == 1;
      }
      if (sending) sent.push_back({i, {}});
    }
    if (!sending || PQpipelineSync(conn_) != 1) {
      const std::string msg = trimmed(PQerrorMessage(conn_));
      // Half a pipeline sent: no state to go on from. A fresh connection, or a failed one that
      // the next transaction connects again.
      if (PQstatus(conn_) == CONNECTION_OK) reset();
      throw SqlError(name_ + ": sending to PostgreSQL failed: " + msg, false);
    }
    std::optional<SqlError> failed;
    auto note = [&](const PGresult* res, const std::string& sql) {
      if (!failed) failed = error_of(res, sql);
    };
    for (const Sent& s : sent) {
      const Held& h = batch[s.held];
      ResultPtr res(PQgetResult(conn_));
      const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
      const bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
      if (!s.prepared.empty()) {
        if (!ok) prepared_.erase(h.sql);  // not prepared: prepare it again next time
        if (!ok && st != PGRES_PIPELINE_ABORTED) note(res.get(), h.sql);
      } else if (ok) {
        if (h.into) *h.into = result_of(res.get());
      } else if (st != PGRES_PIPELINE_ABORTED) {
        note(res.get(), h.sql);
      }
      if (!res) break;  // the connection is gone
      while (ResultPtr rest{PQgetResult(conn_)}) {
      }  // each statement's answer ends with a null
    }
    ResultPtr sync(PQgetResult(conn_));
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(conn_) != 1) {
      if (!failed) failed = SqlError(name_ + ": PostgreSQL's answers ended early: " + trimmed(PQerrorMessage(conn_)), false);
      reset();  // out of step with the server: a fresh session (or a lost one, connected again later)
    }
    if (failed) throw *failed;
  }

  void unlock() noexcept {
    std::lock_guard lock(mu_);
    PQclear(PQexec(conn_, "SELECT pg_advisory_unlock_all()"));
  }

  // Prepared statements are planned for their parameters at every call (plan_once aside): a
  // generic plan does not know that `seq > $1` asks for the last few of 100,000 rows and reads
  // them all, and one made while a table was still small (PostgreSQL settles on it after five
  // runs) keeps scanning it when it is not: the placement pass's UPDATE of 32 jobs by id took
  // 7 ms instead of 0.5.
  // No JIT compilation: a statement costed high (a generic plan's guess, or a coordinator's
  // first read of every node) was compiled for 15–45 ms, longer than it then ran.
  void session_settings() {
    PQclear(PQexec(conn_, "SET plan_cache_mode = force_custom_plan"));
    PQclear(PQexec(conn_, "SET jit = off"));
  }

  // The statement prepared on this connection under a name of its own, once per text: parsed
  // once instead of at every call. Null (run it unprepared) past kMaxPrepared texts.
  const std::string* prepared(const std::string& sql, int n_params) {
    if (auto it = prepared_.find(sql); it != prepared_.end()) return &it->second;
    if (prepared_.size() >= kMaxPrepared) return nullptr;
    std::string name = "orchard_" + std::to_string(next_name_++);
    check(ResultPtr(PQprepare(conn_, name.c_str(), numbered_params(sql).c_str(), n_params, nullptr)), sql);
    return &prepared_.emplace(sql, std::move(name)).first->second;
  }

  // A server restart or a dropped connection: connect again before the next transaction (not
  // inside one, whose work is gone with the old connection; that one fails to its caller).
  void reconnect_if_lost() {
    if (PQstatus(conn_) == CONNECTION_OK || in_transaction()) return;
    reset();
    if (PQstatus(conn_) != CONNECTION_OK)
      throw SqlError(name_ + ": lost the connection to PostgreSQL: " + trimmed(PQerrorMessage(conn_)), false);
  }
  void reset() {
    prepared_.clear();  // they were the old session's
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) return;
    session_settings();
    PQclear(PQexec(conn_, ("SET search_path TO " + schema_).c_str()));
  }

  void check(const ResultPtr& res, const std::string& sql) {
    const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    throw error_of(res.get(), sql);
  }
  SqlError error_of(const PGresult* res, const std::string& sql) const {
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state ? state : "";
    // 40001 serialization_failure, 40P01 deadlock_detected: run the transaction again.
    const bool retry = code == "40001" || code == "40P01";
    const std::string msg = trimmed(res ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
    return SqlError(name_ + ": " + msg + (retry ? "" : " (in: " + sql.substr(0, 200) + ")"), retry);
  }

  std::string name_, schema_;
  PGconn* conn_ = nullptr;
  std::unordered_map<std::string, std::string> prepared_;  // statement text → its name
  uint64_t next_name_ = 0;  // never reused: a name whose PREPARE failed may still be taken
  static constexpr size_t kMaxPrepared = 1024;
  // Statements send() held back, with BEGIN first when none has gone yet; `plain`: sent as
  // they are, unprepared (BEGIN, the lock, COMMIT).
  struct Held {
    std::string sql;
    std::vector<Param> params;
    std::shared_ptr<std::optional<Result>> into;
    bool plain = false;
  };
  std::vector<Held> held_;
  bool begin_held_ = false;  // the transaction's BEGIN is still in held_
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
