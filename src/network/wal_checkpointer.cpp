#include "network/wal_checkpointer.h"

#include <sqlite3.h>

#include <chrono>

#include "network/database.h"

#include "tensor/error.h"

namespace orchard::network::sql {

WalCheckpointer::WalCheckpointer(const std::string& path, int every_ms) : every_ms_(every_ms) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(path + ": cannot open a checkpoint connection: " + msg);
  }
  // A connection learns the file is in WAL mode when it first reads it; until then it would
  // take checkpoints for a no-op. Busy (another connection creating the file or switching it to
  // WAL just then) is a retryable SqlError: the opening retries it as it does its own reads.
  if (const int rc = sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db_);
    sqlite3_close(db_);
    throw SqlError(path + ": cannot read it for checkpoints: " + msg, (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED);
  }
  thread_ = std::thread([this] { run(); });
}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  sqlite3_close_v2(db_);
}

std::pair<int, int> WalCheckpointer::log_state() const {
  std::lock_guard lock(mu_);
  return log_state_;
}

void WalCheckpointer::run() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(every_ms_), [&] { return stop_; })) {
    lock.unlock();
    // PASSIVE: copies what no reader still needs and returns; a busy log (another process's
    // checkpoint, a writer recovering it) is simply tried again next time.
    int log_frames = 0, done = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done);
    lock.lock();
    if (rc == SQLITE_OK) log_state_ = {log_frames, done};
  }
}

}  // namespace orchard::network::sql
