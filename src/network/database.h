#pragma once
// The network's stores (job store, ledger, replay guard, API keys) over one small interface with
// two backends: SQLite, a file per store under the coordinator's data folder (the default), and
// PostgreSQL, one database that several coordinator replicas share (a schema per store).
//
// The stores are written once, in the SQL both understand: `?1`, `?2` … number a statement's
// parameters (PostgreSQL's `$1` is written for it), upserts are INSERT … ON CONFLICT, and every
// operation that reads and then writes runs in write() — one transaction that behaves as if it
// ran alone: SQLite's BEGIN IMMEDIATE takes the file's write lock up front; PostgreSQL's takes
// the store's advisory lock first thing. Should the server still refuse a transaction as a
// deadlock or serialization failure, the whole function runs again, so a function given to
// write() must only touch the database and its own locals until it returns.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/error.h"

namespace orchard::network::sql {

enum class Dialect { SQLite, PostgreSQL };

// A database failure. `retryable`: the same transaction may succeed when run again (SQLite
// busy, PostgreSQL serialization failure or deadlock).
class SqlError : public Error {
 public:
  SqlError(const std::string& what, bool retryable) : Error(what), retryable_(retryable) {}
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

// One cell of a result row. PostgreSQL's cells arrive as text and are parsed when read.
struct Value {
  enum Kind { Null, Int, Real, Text } kind = Null;
  int64_t i = 0;
  double d = 0;
  std::string s;
};
using Row = std::vector<Value>;

struct Param {
  enum Kind { Int, Real, Text } kind;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

struct Result {
  std::vector<Row> rows;
  int64_t changes = 0;  // rows an INSERT, UPDATE or DELETE changed
};

// One connection. Single statements may come from several threads at once; a transaction is
// one thread's at a time (the stores' callers hold a mutex around each operation).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual Dialect dialect() const = 0;
  // For messages: the file's path, or the URL without its password.
  virtual const std::string& name() const = 0;
  // Runs statements without parameters (a schema).
  virtual void exec(const std::string& sql) = 0;
  // Runs one statement with `?N` parameters and returns all its rows.
  virtual Result run(const std::string& sql, const std::vector<Param>& params) = 0;
  // Runs a statement whose result may wait: inside a transaction PostgreSQL holds it back and
  // sends it with the next statement that must answer, or with the COMMIT, all in one round
  // trip (libpq's pipeline mode), and fills `into` then; a failure it meets is thrown there,
  // inside the same transaction. Elsewhere, and on SQLite (no round trips), it runs at once.
  virtual void send(const std::string& sql, const std::vector<Param>& params, std::shared_ptr<std::optional<Result>> into) {
    Result r = run(sql, params);
    if (into) *into = std::move(r);
  }
  // Runs what send() holds back now.
  virtual void flush() {}
  // Inside a write: its COMMIT may return before the commit is on disk. A crash can lose it
  // (never the database's consistency), but only while nothing rests on it: any later commit
  // that waits for the disk puts it there first, both databases keeping one log in order. For
  // work that is simply done again when lost. PostgreSQL only; SQLite's commit is cheap.
  virtual void commit_lazily() {}
  // Inside a transaction of a few rows each reached through an index, run many times a second
  // (a placement pass): each statement text is planned once, not at every call, and a table is
  // read whole only where no index serves. On PostgreSQL planning was a third of the server's
  // time in such a transaction. Its statements must then be written so that a plan made without their
  // parameters' values still takes the index: `seq > ?1` may pick one row or all of them.
  // PostgreSQL only (SQLite plans cheaply); until the transaction ends.
  virtual void plan_once() {}

  // Runs `body` in a transaction and returns what it returns; rolls back when it throws. A call
  // inside another transaction joins it (the outer one commits, and retries).
  template <class F>
  auto write(F body) {
    return transaction(true, std::move(body));
  }
  // A read-only transaction: every statement in `body` sees one moment's state.
  template <class F>
  auto read(F body) {
    return transaction(false, std::move(body));
  }
  bool in_transaction() const { return depth_ > 0; }
  // Whether a commit returns only once it is on disk (the default), or as soon as it is in the
  // operating system's hands: a process killed loses nothing either way, a power cut may lose
  // the last moments' commits (never the database: SQLite's WAL, PostgreSQL's own log).
  virtual void set_wait_for_disk(bool wait) = 0;
  // Called after a transaction was rolled back: for a cache of what it may have read of its
  // own writes (the job store's placement index).
  std::function<void()> on_rollback;

 protected:
  virtual void begin(bool write) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  // How often a transaction refused as retryable runs in all: SQLite's writers already queued
  // for the busy timeout, so once; PostgreSQL's, a few times.
  virtual int transaction_tries() const = 0;

 private:
  template <class F>
  auto transaction(bool write, F body) -> decltype(body());
  static void backoff(int attempt);  // sleeps a little longer each retry, with jitter
  int depth_ = 0;
};

template <class F>
auto Connection::transaction(bool write, F body) -> decltype(body()) {
  if (depth_ > 0) return body();
  for (int attempt = 1;; ++attempt) {
    try {
      begin(write);
      struct Depth {  // inner write()/read() calls join while this one runs
        int& depth;
        ~Depth() { --depth; }
      } inside{++depth_};
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        commit();
        return;
      } else {
        auto r = body();
        commit();
        return r;
      }
    } catch (const SqlError& e) {
      rollback();
      if (on_rollback) on_rollback();
      if (!e.retryable() || attempt >= transaction_tries()) throw;
    } catch (...) {
      rollback();
      if (on_rollback) on_rollback();
      throw;
    }
    backoff(attempt);
  }
}

// A statement in the style of SQLite's API: bind parameters, then step() through its rows. It
// runs on the first step() (or changes()), fetching every row at once — or, after send(), with
// whatever the connection sends next (Connection::send): statements sent one after another
// cost PostgreSQL one round trip together.
class Stmt {
 public:
  Stmt(Connection& c, std::string sql) : c_(c), sql_(std::move(sql)) {}
  Stmt& bind(int i, const std::string& v) { return set(i, Param{Param::Text, 0, 0, v}); }
  Stmt& bind(int i, int64_t v) { return set(i, Param{Param::Int, v, 0, {}}); }
  Stmt& bind(int i, double v) { return set(i, Param{Param::Real, 0, v, {}}); }
  // Runs it with the connection's next round trip; its rows, if read, are there after it.
  void send();
  // Whether it ran and its answer is here: step() would not wait for a round trip.
  bool answered() const { return ran_ && (!sent_ || sent_->has_value()); }
  // True while a row is available.
  bool step();
  int64_t changes();
  int64_t i64(int col) const;
  double f64(int col) const;
  std::string text(int col) const;
  bool null(int col) const { return cell(col).kind == Value::Null; }

 private:
  Stmt& set(int i, Param p);
  const Value& cell(int col) const;
  void ensure_run();
  Connection& c_;
  std::string sql_;
  std::vector<Param> params_;
  Result result_;
  std::shared_ptr<std::optional<Result>> sent_;  // where send() has the answer put
  bool ran_ = false;
  size_t next_ = 0;  // the row step() moves to
};

// What kind of store a database is: meta.format and meta.version name it, and `schema` (its
// tables, indexes and triggers, in SQLite's words) makes an empty one. PostgreSQL runs
// `postgres_schema` instead when given, else `schema` with its types spelled as PostgreSQL's
// (to_postgres_ddl).
struct FileKind {
  const char* noun;     // "ledger", "job store": for messages
  const char* format;   // meta.format
  const char* version;  // meta.version
  const char* schema;
  const char* postgres_schema = nullptr;
  // Older versions it upgrades, oldest first: a store at `from` (meta.version) runs `sql`
  // (SQLite's words, as `schema`) and is then at the next step's `from`, or at `version` after
  // the last — each step once, in one transaction, when opened.
  struct Upgrade {
    const char* from;
    const char* sql;
  };
  std::span<const Upgrade> upgrades = {};
};

// True for "postgresql://…" and "postgres://…".
bool is_postgres_url(const std::string& location);
// The location as messages may show it: a URL's password, in either place libpq takes one,
// becomes ***.
std::string without_password(const std::string& location);

// Opens `location` — an SQLite file's path, or a PostgreSQL URL — as a store of `kind`, making
// it one when it is empty (a PostgreSQL database keeps each kind in a schema of its own,
// named after the format: orchard_jobs, orchard_ledger, …). Throws orchard::Error naming the
// location when it cannot be opened, or holds something else.
//
// SQLite: WAL (readers never block the writer; several processes share the file),
// synchronous=FULL (a committed transaction survives SIGKILL and power loss), a busy timeout
// (writers queue on BEGIN IMMEDIATE instead of failing).
std::unique_ptr<Connection> open_database(const std::string& location, const FileKind& kind);

// SQLite DDL in PostgreSQL's words: INTEGER → BIGINT, REAL → DOUBLE PRECISION, no WITHOUT ROWID.
std::string to_postgres_ddl(const std::string& sqlite_ddl);

// ---- the backends (open_database dispatches to them) ----
inline constexpr int kBusyTimeoutMs = 30'000;
// Both return a connection holding `kind`'s tables, created when the database was empty.
std::unique_ptr<Connection> open_sqlite(const std::string& path, const FileKind& kind);
// Throws orchard::Error saying so when this build has no PostgreSQL client (libpq).
std::unique_ptr<Connection> open_postgres(const std::string& url, const FileKind& kind);
// Creates the meta table and `kind`'s schema when the database (the connection's schema) has no
// tables, then checks meta names `kind`. Inside the backend's own guard against racing creators.
void create_or_check(Connection& c, const FileKind& kind);

}  // namespace orchard::network::sql
