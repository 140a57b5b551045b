#include "network/sqlite_util.h"

#include "tensor/error.h"

namespace orchard::network::sql {

void use_wal_full(sqlite3* db, const std::string& path) {
  {
    Stmt wal(db, "PRAGMA journal_mode = WAL");
    wal.step();
    if (wal.text(0) != "wal") throw Error(path + ": cannot switch to WAL mode (journal_mode " + wal.text(0) + ")");
  }
  exec(db, "PRAGMA synchronous = FULL");
}

DbPtr open_shared(const std::filesystem::path& path, const std::string& what, const char* schema) {
  const std::string p = path.string();
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(p.c_str(), &raw, flags, nullptr) != SQLITE_OK) {
    const std::string msg = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    throw Error(p + ": cannot open " + what + ": " + msg);
  }
  DbPtr db(raw);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  try {
    retry_while_busy([&] {
      use_wal_full(raw, p);
      Transaction t(raw);
      exec(raw, schema);
      t.commit();
      return 0;
    });
  } catch (const SqlError& e) {
    if (e.busy()) throw;
    throw Error(p + ": cannot open " + what + ": " + sqlite3_errmsg(raw));
  }
  return db;
}

}  // namespace orchard::network::sql
