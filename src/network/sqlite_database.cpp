// The SQLite backend: a store is one file, shared by any number of connections and processes.
#include <sqlite3.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "network/database.h"
#include "network/wal_checkpointer.h"

namespace orchard::network::sql {
namespace {

class SqliteConnection : public Connection {
 public:
  SqliteConnection(std::string path, const char* noun) : name_(std::move(path)) {
    if (sqlite3_open_v2(name_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw Error(name_ + ": cannot open the " + noun + ": " + msg);
    }
    sqlite3_busy_handler(db_, &SqliteConnection::wait_for_lock, this);
    sqlite3_extended_result_codes(db_, 1);
  }
  ~SqliteConnection() override {
    for (auto& [sql, stmt] : prepared_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Dialect dialect() const override { return Dialect::SQLite; }
  void set_wait_for_disk(bool wait) override { exec(wait ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"); }

  // The stores run the same few dozen statements over and over: each is compiled once (a
  // statement that the schema changed under is compiled again by SQLite itself).
  sqlite3_stmt* prepared(const std::string& sql) {
    if (auto it = prepared_.find(sql); it != prepared_.end()) return it->second;
    if (prepared_.size() >= kMaxPrepared) {
      for (auto& [text, stmt] : prepared_) sqlite3_finalize(stmt);
      prepared_.clear();
    }
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
      sqlite3_finalize(raw);
      fail("preparing '" + sql + "'");
    }
    prepared_.emplace(sql, raw);
    return raw;
  }
  const std::string& name() const override { return name_; }

  void exec(const std::string& sql) override {
    std::lock_guard lock(mu_);
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      const std::string m = msg ? msg : "unknown error";
      sqlite3_free(msg);
      throw SqlError(name_ + ": " + m, busy());
    }
  }

  Result run(const std::string& sql, const std::vector<Param>& params) override {
    std::lock_guard lock(mu_);  // the change count below is this statement's
    sqlite3_stmt* raw = prepared(sql);
    struct Reset {  // ready for the next run, whatever happens to this one
      sqlite3_stmt* s;
      ~Reset() {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
      }
    } reset{raw};
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = static_cast<int>(i) + 1;
      const Param& p = params[i];
      const int rc = p.kind == Param::Int    ? sqlite3_bind_int64(raw, at, p.i)
                     : p.kind == Param::Real ? sqlite3_bind_double(raw, at, p.d)
                                             : sqlite3_bind_text(raw, at, p.s.data(), static_cast<int>(p.s.size()),
                                                                 SQLITE_TRANSIENT);
      if (rc != SQLITE_OK) fail("binding parameter " + std::to_string(at) + " of '" + sql + "'");
    }
    Result r;
    for (;;) {
      const int rc = sqlite3_step(raw);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail("statement failed");
      Row row(static_cast<size_t>(sqlite3_column_count(raw)));
      for (int c = 0; c < static_cast<int>(row.size()); ++c) {
        Value& v = row[static_cast<size_t>(c)];
        switch (sqlite3_column_type(raw, c)) {
          case SQLITE_INTEGER: v.kind = Value::Int, v.i = sqlite3_column_int64(raw, c); break;
          case SQLITE_FLOAT: v.kind = Value::Real, v.d = sqlite3_column_double(raw, c); break;
          case SQLITE_NULL: break;
          default: {
            const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(raw, c));
            v.kind = Value::Text;
            if (t) v.s.assign(t, static_cast<size_t>(sqlite3_column_bytes(raw, c)));
          }
        }
      }
      r.rows.push_back(std::move(row));
    }
    if (!sqlite3_stmt_readonly(raw)) r.changes = sqlite3_changes(db_);
    return r;
  }

 protected:
  // IMMEDIATE takes the write lock up front: the reads that decide a write see the state it
  // changes, with no other writer in between.
  void begin(bool write) override { exec(write ? "BEGIN IMMEDIATE" : "BEGIN"); }
  void commit() override { exec("COMMIT"); }
  int transaction_tries() const override { return 1; }
  void rollback() noexcept override {
    std::lock_guard lock(mu_);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  bool busy() const {
    const int code = sqlite3_extended_errcode(db_) & 0xff;
    return code == SQLITE_BUSY || code == SQLITE_LOCKED;
  }
  [[noreturn]] void fail(const std::string& what) { throw SqlError(name_ + ": " + what + ": " + sqlite3_errmsg(db_), busy()); }

  // Waiting for another connection's write lock, up to kBusyTimeoutMs. SQLite's own timeout
  // sleeps up to 100 ms between looks, so a writer waiting on writers that commit every few
  // milliseconds can miss every free moment for the whole timeout (a test of three replicas on
  // one file under load failed so); looking every millisecond or two gives it its turn.
  static int wait_for_lock(void* self, int tries) {
    auto& c = *static_cast<SqliteConnection*>(self);
    const auto now = std::chrono::steady_clock::now();
    if (tries == 0) c.waiting_since_ = now;
    if (now - c.waiting_since_ > std::chrono::milliseconds(kBusyTimeoutMs)) return 0;
    std::this_thread::sleep_for(std::chrono::microseconds(tries < 100 ? 500 : 2000));
    return 1;
  }

  std::string name_;
  sqlite3* db_ = nullptr;
  std::chrono::steady_clock::time_point waiting_since_;
  std::mutex mu_;  // one statement at a time (a transaction's callers keep theirs together)
  static constexpr size_t kMaxPrepared = 256;
  std::unordered_map<std::string, sqlite3_stmt*> prepared_;

 public:
  std::unique_ptr<WalCheckpointer> checkpointer;  // set once the file is in WAL mode
};

// Runs `f` again while another connection holds a lock SQLite does not wait for on its own
// (a file being switched to WAL or recovered by someone else), up to the busy timeout.
template <class F>
void retry_while_busy(F f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      return f();
    } catch (const SqlError& e) {
      if (!e.retryable() || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::unique_ptr<Connection> open_sqlite(const std::string& path, const FileKind& kind) {
  auto c = std::make_unique<SqliteConnection>(path, kind.noun);
  retry_while_busy([&] {
    // The first read of the header tells an SQLite file from anything else.
    try {
      Stmt(*c, "SELECT count(*) FROM sqlite_master").step();
    } catch (const SqlError& e) {
      if (e.retryable()) throw;
      throw Error(path + ": not an Orchard " + kind.noun + " (" + e.what() + ")");
    }
    Stmt wal(*c, "PRAGMA journal_mode = WAL");
    if (!wal.step() || wal.text(0) != "wal")
      throw Error(path + ": cannot switch the " + kind.noun + " to WAL mode");
    c->exec("PRAGMA synchronous = FULL");
    // 32 MiB of pages instead of 2: 100,000 nodes' rows and the jobs' indexes stay in memory
    // rather than being read back from the OS for every placement.
    c->exec("PRAGMA cache_size = -32768");
    create_or_check(*c, kind);
  });
  // The log is copied back by a thread of the connection's own (wal_checkpointer.h); the
  // automatic checkpoint stays as a backstop for a log that thread could not keep short.
  c->exec("PRAGMA wal_autocheckpoint = 20000");
  retry_while_busy([&] { c->checkpointer = std::make_unique<WalCheckpointer>(path); });
  return c;
}

}  // namespace orchard::network::sql
