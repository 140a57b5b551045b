// The background checkpointer copies a write-ahead log back into its SQLite file while the
// writer keeps its own connection and never checkpoints itself.
#include "network/wal_checkpointer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "network/test_files.h"

namespace orchard::network::sql {
namespace {

void exec(sqlite3* db, const char* sql) { ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql; }

int64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

// Waits until the checkpointer's last pass found every frame of a log of at least `frames`
// back in the file.
void wait_until_copied(const WalCheckpointer& c, int frames) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (auto s = c.log_state(); s.first < frames || s.second < s.first; s = c.log_state()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "log " << s.first << " frames, " << s.second << " copied";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(WalCheckpointer, CopiesTheWritersLogBackWhileTheWriterNeverCheckpoints) {
  const std::string path = (test::fresh_dir("wal-checkpointer") / "t.sqlite").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  exec(db, "PRAGMA journal_mode = WAL");
  exec(db, "PRAGMA wal_autocheckpoint = 0");
  exec(db, "CREATE TABLE t(x TEXT)");
  for (int i = 0; i < 200; ++i) exec(db, "INSERT INTO t VALUES(hex(randomblob(2000)))");
  // Nothing copied back yet: the file holds only its first pages, the log every commit.
  const int64_t file_before = file_size(path);
  EXPECT_GT(file_size(path + "-wal"), 200 * 4096);
  {
    WalCheckpointer checkpointer(path, 10);
    wait_until_copied(checkpointer, 200);
    EXPECT_GT(file_size(path), file_before + 100 * 4096);
    // The writer goes on while the checkpointer runs, and its new frames are copied too.
    const int64_t file_mid = file_size(path);
    for (int i = 0; i < 50; ++i) exec(db, "INSERT INTO t VALUES(hex(randomblob(2000)))");
    // The last pass's state may still describe the first log (every frame copied), so wait on
    // the file itself: it grows only when a checkpoint copies the new frames into it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (file_size(path) <= file_mid + 25 * 4096 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GT(file_size(path), file_mid + 25 * 4096);
  }
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &count, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(count, 0), 250);
  sqlite3_finalize(count);
  sqlite3_close(db);
}

TEST(WalCheckpointer, ACheckpointConnectionThatCannotOpenIsAnErrorNamingTheFile) {
  try {
    WalCheckpointer checkpointer("/nonexistent-dir/x.sqlite");
    FAIL() << "opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.sqlite: cannot open a checkpoint connection"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace orchard::network::sql
