#pragma once
// A thin RAII layer over the SQLite C API for the network's databases (the ledger, the replay
// guard, API keys): an owned connection opened for sharing between processes, a prepared
// statement that finalizes itself, and errors that name the file and SQLite's message.
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "tensor/error.h"

namespace orchard::network::sql {

// An SQLite failure; `code` (the extended result code) tells a busy file from a broken one.
class SqlError : public Error {
 public:
  SqlError(const std::string& what, int code) : Error(what), code(code) {}
  bool busy() const { return (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED; }
  int code;
};

[[noreturn]] inline void fail(sqlite3* db, const std::string& what) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  throw SqlError(std::string(file && *file ? file : "ledger") + ": " + what + ": " +
                     (db ? sqlite3_errmsg(db) : "out of memory"),
                 db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM);
}

inline void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg); rc != SQLITE_OK) {
    const std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    const char* file = sqlite3_db_filename(db, "main");
    throw SqlError(std::string(file && *file ? file : "ledger") + ": " + m, sqlite3_extended_errcode(db));
  }
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) fail(db, std::string("preparing '") + sql + "'");
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  // True while a row is available; false when done. Throws on errors (busy past the timeout,
  // constraint violations, corruption).
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, "statement failed");
  }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  int type(int col) const { return sqlite3_column_type(s_, col); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, "binding a parameter");
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

// BEGIN IMMEDIATE … COMMIT, rolled back when destroyed uncommitted (an exception).
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

// How long a connection waits for another process's write lock before failing.
inline constexpr int kBusyTimeoutMs = 30'000;

// Runs `f` again while another connection holds a lock SQLite does not wait for on its own
// (a file being switched to WAL or recovered by someone else), up to the busy timeout.
template <class F>
auto retry_while_busy(F f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      return f();
    } catch (const SqlError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// WAL: readers never block the writer and several processes share the file; FULL: a
// transaction that returned from COMMIT is on disk even if the process dies right after.
// Throws orchard::Error naming `path` when the file cannot be switched to WAL.
void use_wal_full(sqlite3* db, const std::string& path);

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// Opens (creating when absent) the database at `path` for several processes: busy timeout,
// extended result codes, WAL and synchronous=FULL, then runs `schema` (idempotent statements,
// CREATE … IF NOT EXISTS) in one IMMEDIATE transaction. `what` names the store in errors
// ("the replay guard"). Throws orchard::Error naming the path when the file cannot be opened or
// is not an SQLite database.
DbPtr open_shared(const std::filesystem::path& path, const std::string& what, const char* schema);

}  // namespace orchard::network::sql

namespace orchard::network {
struct Entry;
// An entry from a row of `SELECT <kEntryColumns>` (ledger.cpp), for the ledger and its verifier.
Entry read_entry(const sql::Stmt& s);
}  // namespace orchard::network
