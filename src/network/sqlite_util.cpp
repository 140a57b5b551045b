#include "network/sqlite_util.h"

#include <chrono>
#include <thread>

namespace orchard::network::sql {
namespace {

// The database's tables, to tell an empty file (make it ours) from someone else's database.
int64_t table_count(sqlite3* db) {
  Stmt s(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  s.step();
  return s.i64(0);
}

void check_kind(sqlite3* db, const std::string& path, const FileKind& kind) {
  const std::string what = std::string("an Orchard ") + kind.noun;
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'format'", -1, &raw, nullptr) != SQLITE_OK) {
    sqlite3_finalize(raw);
    throw Error(path + ": not " + what + " (an SQLite database without the " + kind.noun + "'s tables)");
  }
  std::string format;
  if (sqlite3_step(raw) == SQLITE_ROW)
    if (const auto* p = sqlite3_column_text(raw, 0)) format = reinterpret_cast<const char*>(p);
  sqlite3_finalize(raw);
  if (format != kind.format)
    throw Error(path + ": not " + what + " (meta.format is '" + format + "', expected '" + kind.format + "')");
  Stmt v(db, "SELECT value FROM meta WHERE key = 'version'");
  const std::string version = v.step() ? v.text(0) : "";
  if (version != kind.version)
    throw Error(path + ": Orchard " + kind.noun + " version '" + version + "' is not supported (this build reads " +
                kind.version + ")");
}

// Runs `f` again while another connection holds a lock SQLite does not wait for on its own
// (a file being switched to WAL or recovered by someone else), up to the busy timeout.
template <class F>
void retry_while_busy(F f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      f();
      return;
    } catch (const SqlError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

void DbCloser::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

DbPtr open_database(const std::filesystem::path& path, const FileKind& kind) {
  const std::string p = path.string();
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(p.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    const std::string msg = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    throw Error(p + ": cannot open the " + kind.noun + ": " + msg);
  }
  DbPtr db(raw);  // closed if anything below throws
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  retry_while_busy([&] {
    // The first read of the header tells an SQLite file from anything else.
    int64_t tables = 0;
    try {
      tables = table_count(raw);
    } catch (const SqlError& e) {
      if (e.busy()) throw;
      throw Error(p + ": not an Orchard " + kind.noun + " (" + sqlite3_errmsg(raw) + ")");
    }
    {
      Stmt wal(raw, "PRAGMA journal_mode = WAL");
      wal.step();
      if (wal.text(0) != "wal")
        throw Error(p + ": cannot switch the " + kind.noun + " to WAL mode (journal_mode " + wal.text(0) + ")");
    }
    exec(raw, "PRAGMA synchronous = FULL");
    if (tables == 0) {
      Transaction t(raw);
      if (table_count(raw) == 0) {  // another process may have won the race
        exec(raw, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
        exec(raw, kind.schema);
        Stmt meta(raw, "INSERT INTO meta(key, value) VALUES('format', ?1), ('version', ?2)");
        meta.bind(1, std::string(kind.format)).bind(2, std::string(kind.version)).step();
      }
      t.commit();
    }
  });
  check_kind(raw, p, kind);
  return db;
}

}  // namespace orchard::network::sql
