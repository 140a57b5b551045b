#pragma once
// Files for the network's store tests: a fresh directory per test, the check that a store
// refuses a file that is not its database, and tampering with a ledger file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

// Runs `sql` on the ledger file with the append-only triggers dropped first: what someone with
// raw write access could do.
inline void tamper(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string all =
      "DROP TRIGGER IF EXISTS entries_no_update; DROP TRIGGER IF EXISTS entries_no_delete; "
      "DROP TRIGGER IF EXISTS signed_heads_no_update; DROP TRIGGER IF EXISTS signed_heads_no_delete; " +
      sql;
  char* msg = nullptr;
  const int rc = sqlite3_exec(db, all.c_str(), nullptr, nullptr, &msg);
  const std::string err = msg ? msg : "";
  sqlite3_free(msg);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << err;
}

}  // namespace orchard::network::test
