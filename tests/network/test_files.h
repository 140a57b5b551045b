#pragma once
// Files for the network's store tests: a fresh directory per test, the check that a store
// refuses a file that is not its database, and tampering with a ledger (either backend).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "network/database.h"
#include "tensor/error.h"

namespace orchard::network::test {

// A fresh, empty directory under gtest's temp dir, named after the test and this process, so
// parallel ctest runs never share files.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("orchard-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// `open(path)` on a text file must throw an orchard::Error that names the file.
template <class Open>
void expect_refuses_text_file(const std::string& name, Open open) {
  const auto path = fresh_dir(name) / "notes.txt";
  std::ofstream(path) << "this is a text file, not a database, and it is long enough to have a header.\n";
  try {
    open(path);
    ADD_FAILURE() << "opened a text file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

// Raw SQL on a ledger (an SQLite file or a PostgreSQL URL), past the Ledger class; returns the
// database's error message ("" on success).
inline std::string raw_exec(const std::string& location, const std::string& sql) {
  try {
    sql::open_database(location, {"ledger", "orchard-ledger", "1", ""})->exec(sql);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// Runs `sql` on a ledger with the append-only triggers dropped first: what someone with raw
// write access could do.
inline void tamper(const std::string& location, const std::string& sql) {
  std::string all;
  for (const char* table : {"entries", "signed_heads"})
    for (const char* op : {"update", "delete", "truncate"})
      all += std::string("DROP TRIGGER IF EXISTS ") + table + "_no_" + op +
             (sql::is_postgres_url(location) ? std::string(" ON ") + table : "") + "; ";
  ASSERT_EQ(raw_exec(location, all + sql), "");
}

}  // namespace orchard::network::test
