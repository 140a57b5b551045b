#pragma once
// Copies an SQLite file's write-ahead log back into the file from a thread and connection of
// its own, so the connection that writes never does it inside a commit. SQLite's automatic
// checkpoint runs in whichever commit crosses 1,000 log pages: among 100,000 simulated nodes
// those placements took 11–14 ms against ~3 (`orchard network simulate` p99; 5.5–6.4 ms with
// this, once a second). A passive checkpoint waits for no one: writers go on appending while
// it copies. Once a second, not more often: each pass ends in an fsync of the file, and a page
// written many times in that second is copied once (every 50–200 ms cost a fifth of the
// placements/s).
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

struct sqlite3;

namespace orchard::network::sql {

class WalCheckpointer {
 public:
  // Starts checkpointing `path` (already in WAL mode) every `every_ms`. Throws orchard::Error
  // when its connection cannot be opened, sql::SqlError (retryable when busy) when it cannot
  // read the file.
  explicit WalCheckpointer(const std::string& path, int every_ms = 1000);
  ~WalCheckpointer();  // stops the thread and closes its connection
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // At the last pass: frames in the log, and how many of them are back in the file (for tests).
  std::pair<int, int> log_state() const;

 private:
  void run();

  sqlite3* db_ = nullptr;
  int every_ms_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::pair<int, int> log_state_{0, 0};
  std::thread thread_;
};

}  // namespace orchard::network::sql
