#pragma once
// A thin RAII layer over the SQLite C API for the network's files (the ledger, the job store, the
// replay guard, API keys): opening one the same way everywhere, a prepared statement that
// finalizes itself, and errors that name the file and SQLite's message.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "network/sqlite_handle.h"
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
  throw SqlError(std::string(file && *file ? file : "database") + ": " + what + ": " +
                     (db ? sqlite3_errmsg(db) : "out of memory"),
                 db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM);
}

inline void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg); rc != SQLITE_OK) {
    const std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    const char* file = sqlite3_db_filename(db, "main");
    throw SqlError(std::string(file && *file ? file : "database") + ": " + m, sqlite3_extended_errcode(db));
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
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double f64(int col) const { return sqlite3_column_double(s_, col); }
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

// What kind of Orchard file a database is: meta.format and meta.version name it, and `schema`
// (its tables, indexes and triggers) makes an empty file one; open_database adds the meta table.
struct FileKind {
  const char* noun;     // "ledger", "job store": for messages
  const char* format;   // meta.format
  const char* version;  // meta.version
  const char* schema;
};

inline constexpr int kBusyTimeoutMs = 30'000;

// Opens (creating when absent or empty) the file at `path` as `kind`: WAL, so readers never
// block the writer and several processes share the file; synchronous=FULL, so a transaction
// that returned from COMMIT is on disk even if the process dies right after; a busy timeout,
// so writers queue on BEGIN IMMEDIATE instead of failing. Throws orchard::Error naming the path
// when the file is not an SQLite database, or is one of another kind or version.
DbPtr open_database(const std::filesystem::path& path, const FileKind& kind);

}  // namespace orchard::network::sql

namespace orchard::network {
struct Entry;
// An entry from a row of `SELECT <kEntryColumns>` (ledger.cpp), for the ledger and its verifier.
Entry read_entry(const sql::Stmt& s);
}  // namespace orchard::network
