#pragma once
// An owned SQLite connection, closed when dropped; declared apart from sqlite_util.h so a class
// can hold one without its header pulling in sqlite3.h.
#include <memory>

struct sqlite3;

namespace orchard::network::sql {

struct DbCloser {
  void operator()(sqlite3* db) const;  // sqlite3_close_v2
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

}  // namespace orchard::network::sql
