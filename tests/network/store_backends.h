#pragma once
// The network's store tests run on both backends: a fresh SQLite file, or a fresh database on a
// PostgreSQL server the tests start themselves (initdb + pg_ctl in a temp folder, reached over
// a Unix socket only, stopped when the test program ends). As root — CI — the server runs as
// the `postgres` user, since PostgreSQL refuses root. A PostgreSQL test skips, saying so, only
// when the server's programs are not installed (Debian: the `postgresql` package).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <signal.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "network/database.h"

namespace orchard::network::test {

enum class Backend { SQLite, PostgreSQL };

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& p) {
  return p.param == Backend::SQLite ? "SQLite" : "PostgreSQL";
}
inline void PrintTo(Backend b, std::ostream* os) { *os << (b == Backend::SQLite ? "SQLite" : "PostgreSQL"); }

class PostgresServer {
 public:
  // The program's server, started on first use; nullptr, with `why`, when it cannot be.
  // `absent` tells "PostgreSQL is not installed" (skip) from "it failed to start" (fail).
  static PostgresServer* get(std::string* why, bool* absent = nullptr) {
    static std::string failure;
    static bool missing = false;
    static std::unique_ptr<PostgresServer> server = [] {
      std::unique_ptr<PostgresServer> s(new PostgresServer);
      failure = s->start();
      missing = s->bin_.empty();
      if (!failure.empty()) s.reset();
      return s;
    }();
    if (!server && why) *why = failure;
    if (absent) *absent = missing;
    return server.get();
  }

  // For a test's SetUp: skips when PostgreSQL is not installed, fails when it is but the server
  // did not start. Returns the server, or nullptr when the test must stop.
  static PostgresServer* require() {
    std::string why;
    bool absent = false;
    PostgresServer* s = get(&why, &absent);
    // (In lambdas: the gtest macros return from the function they are in.)
    if (!s && absent) [&] { GTEST_SKIP() << "PostgreSQL tests skipped: " << why; }();
    if (!s && !absent) [&] { FAIL() << "the test PostgreSQL server did not start: " << why; }();
    return s;
  }

  ~PostgresServer() {
    if (started_) sh(as_owner(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop") + " >/dev/null 2>&1");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A fresh, empty database on the server, as a postgresql:// URL.
  std::string fresh_database(const std::string& name) {
    std::string db = "t" + std::to_string(++count_) + "_";
    for (char c : name) db += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    db = db.substr(0, 60);
    if (sh(bin_ + "/createdb -h " + dir_ + " -U postgres " + db) != 0) throw Error("createdb " + db + " failed");
    return url(db);
  }
  std::string url(const std::string& db) const { return "postgresql:///" + db + "?host=" + dir_ + "&user=postgres"; }

 private:
  static int sh(const std::string& cmd) { return std::system(cmd.c_str()); }
  std::string as_owner(const std::string& cmd) const {
    return ::geteuid() == 0 ? "runuser -u postgres -- " + cmd : cmd;
  }

  // Empty when the server runs; else why not.
  std::string start() {
    const char* env = std::getenv("ORCHARD_PG_BIN");
    for (const char* candidate :
         {env ? env : "", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"})
      if (*candidate && std::filesystem::exists(std::string(candidate) + "/initdb")) {
        bin_ = candidate;
        break;
      }
    if (bin_.empty())
      return "PostgreSQL's server programs (initdb, pg_ctl) are not installed: apt-get install postgresql "
             "(scripts/install-deps.sh), or set ORCHARD_PG_BIN";
    stop_orphans();
    dir_ = ::testing::TempDir() + "orchard-pg-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (::geteuid() == 0 && sh("chown postgres " + dir_) != 0) return "cannot give " + dir_ + " to the postgres user";
    // initdb once per machine (it takes seconds); each program copies the result.
    const std::string tmpl = template_dir();
    if (tmpl.empty()) return "initdb failed (see " + ::testing::TempDir() + "orchard-pg-initdb.log)";
    if (sh(as_owner("cp -a " + tmpl + " " + dir_ + "/data")) != 0) return "cannot copy the initdb template " + tmpl;
    const std::string opts = "-c listen_addresses='' -k " + dir_ + " -c fsync=off -c full_page_writes=off -c max_connections=200";
    if (sh(as_owner(bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/log -w -t 60 -o \"" + opts + "\" start") +
           " >/dev/null") != 0)
      return "pg_ctl start failed (log: " + dir_ + "/log)";
    started_ = true;
    return {};
  }

  // Servers of test programs that died before stopping theirs (killed by a timeout): their
  // folder names a process that is gone.
  void stop_orphans() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
      const std::string name = e.path().filename().string();
      const std::string prefix = "orchard-pg-";
      if (name.rfind(prefix, 0) != 0 || name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name.substr(prefix.size())));
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
      sh(as_owner(bin_ + "/pg_ctl -D " + e.path().string() + "/data -m immediate -w stop") + " >/dev/null 2>&1");
      std::filesystem::remove_all(e.path(), ec);
    }
  }

  // A ready-made cluster (C locale: byte order, as SQLite sorts text), made under a lock by
  // the first test program that needs it.
  std::string template_dir() const {
    const std::string base = ::testing::TempDir() + "orchard-pg-template-" + std::to_string(::geteuid()) + "-" +
                             std::to_string(std::hash<std::string>{}(bin_) % 100000);  // one per server version
    const int lock = ::open((base + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock < 0) return {};
    ::flock(lock, LOCK_EX);
    std::string out = base + "/data";
    if (!std::filesystem::exists(base + "/ready")) {
      std::filesystem::remove_all(base);
      std::filesystem::create_directories(base);
      if (::geteuid() == 0) sh("chown postgres " + base);
      const std::string log = ::testing::TempDir() + "orchard-pg-initdb.log";
      if (sh(as_owner(bin_ + "/initdb -D " + out + " -U postgres -A trust --locale=C -E UTF8 --no-sync") + " >" + log +
             " 2>&1") == 0)
        std::ofstream(base + "/ready") << "ok\n";
      else
        out.clear();
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
    return out;
  }

  std::string bin_, dir_;
  bool started_ = false;
  int count_ = 0;
};

// A fresh store location for `name` on `backend`: an SQLite file path or a PostgreSQL URL.
// Skips the calling test (GTEST_SKIP in the caller via the empty result) when PostgreSQL is
// not installed.
inline std::string fresh_location(Backend backend, const std::string& name, std::string* skip) {
  if (backend == Backend::SQLite) {
    const std::string p = ::testing::TempDir() + "orchard-" + name + "-" + std::to_string(::getpid()) + ".sqlite";
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(p + suffix);
    return p;
  }
  PostgresServer* pg = PostgresServer::get(skip);
  return pg ? pg->fresh_database(name) : std::string();
}

// A test run once per backend: `fresh(name)` is a new store location on this run's backend.
// A passing test's SQLite files are removed after it (a failing one's stay, to look at).
class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::PostgreSQL) PostgresServer::require();
  }
  void TearDown() override {
    if (HasFailure()) return;
    std::error_code ignored;
    for (const std::string& p : files_)
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(p + suffix, ignored);
  }
  std::string fresh(const std::string& name) {
    std::string at = fresh_location(GetParam(), name, nullptr);
    if (sqlite()) files_.push_back(at);
    return at;
  }
  bool sqlite() const { return GetParam() == Backend::SQLite; }

 private:
  std::vector<std::string> files_;
};

}  // namespace orchard::network::test
