// What both database backends share: statements, retries, and making or checking a store's
// tables. The backends are sqlite_database.cpp and postgres_database.cpp.
#include "network/database.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace orchard::network::sql {

void Connection::backoff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const int cap_ms = std::min(200, 2 << std::min(attempt, 7));
  std::this_thread::sleep_for(std::chrono::milliseconds(1 + static_cast<int>(rng() % static_cast<unsigned>(cap_ms))));
}

// ---- Stmt ----

Stmt& Stmt::set(int i, Param p) {
  if (i < 1) throw Error(c_.name() + ": parameter index " + std::to_string(i) + " (they count from 1)");
  if (params_.size() < static_cast<size_t>(i)) params_.resize(static_cast<size_t>(i), Param{Param::Text, 0, 0, {}});
  params_[static_cast<size_t>(i) - 1] = std::move(p);
  return *this;
}

void Stmt::send() {
  if (ran_) throw Error(c_.name() + ": statement sent twice (" + sql_ + ")");
  sent_ = std::make_shared<std::optional<Result>>();
  c_.send(sql_, params_, sent_);
  ran_ = true;
}

void Stmt::ensure_run() {
  if (sent_) {
    if (!*sent_) c_.flush();
    // A statement after a failed one in the same round trip never ran (the failure was thrown).
    if (!*sent_) throw Error(c_.name() + ": statement not run: one sent before it failed (" + sql_ + ")");
    result_ = std::move(**sent_);
    sent_.reset();
  }
  if (ran_) return;
  result_ = c_.run(sql_, params_);
  ran_ = true;
}

bool Stmt::step() {
  ensure_run();
  if (next_ <= result_.rows.size()) ++next_;  // past the last row: reads throw
  return next_ <= result_.rows.size();
}

int64_t Stmt::changes() {
  ensure_run();
  return result_.changes;
}

const Value& Stmt::cell(int col) const {
  if (next_ == 0 || next_ > result_.rows.size())
    throw Error(c_.name() + ": reading a row that is not there (" + sql_ + ")");
  const Row& row = result_.rows[next_ - 1];
  if (col < 0 || static_cast<size_t>(col) >= row.size())
    throw Error(c_.name() + ": no column " + std::to_string(col) + " in (" + sql_ + ")");
  return row[static_cast<size_t>(col)];
}

int64_t Stmt::i64(int col) const {
  const Value& v = cell(col);
  switch (v.kind) {
    case Value::Int: return v.i;
    case Value::Real: return static_cast<int64_t>(v.d);
    case Value::Text: return std::strtoll(v.s.c_str(), nullptr, 10);
    case Value::Null: break;
  }
  return 0;
}

double Stmt::f64(int col) const {
  const Value& v = cell(col);
  switch (v.kind) {
    case Value::Int: return static_cast<double>(v.i);
    case Value::Real: return v.d;
    case Value::Text: return std::strtod(v.s.c_str(), nullptr);
    case Value::Null: break;
  }
  return 0;
}

std::string Stmt::text(int col) const {
  const Value& v = cell(col);
  switch (v.kind) {
    case Value::Int: return std::to_string(v.i);
    case Value::Real: return std::to_string(v.d);
    case Value::Text: return v.s;
    case Value::Null: break;
  }
  return {};
}

// ---- opening ----

bool is_postgres_url(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

std::string without_password(const std::string& location) {
  if (!is_postgres_url(location)) return location;
  std::string s = location;
  // postgresql://user:secret@host/db → postgresql://user:***@host/db
  const size_t auth = s.find("://") + 3;
  const size_t auth_end = std::min(s.find('/', auth), s.size());
  const size_t at = s.rfind('@', auth_end);
  if (at != std::string::npos && at >= auth) {
    const size_t colon = s.find(':', auth);
    if (colon < at) s.replace(colon + 1, at - colon - 1, "***");
  }
  // …?password=secret&… → …?password=***&…
  for (const char* key : {"?password=", "&password="}) {
    for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p + 1)) {
      const size_t value = p + std::strlen(key);
      const size_t end = std::min(s.find('&', value), s.size());
      s.replace(value, end - value, "***");
    }
  }
  return s;
}

std::unique_ptr<Connection> open_database(const std::string& location, const FileKind& kind) {
  return is_postgres_url(location) ? open_postgres(location, kind) : open_sqlite(location, kind);
}

std::string to_postgres_ddl(const std::string& sqlite_ddl) {
  // Whole words only (std::regex here tripped GCC 12's -Wmaybe-uninitialized under -O1).
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  const auto replace_word = [&](std::string& s, const std::string& word, const std::string& with) {
    for (size_t p = s.find(word); p != std::string::npos; p = s.find(word, p)) {
      const bool starts = p == 0 || !word_char(s[p - 1]);
      const bool ends = p + word.size() == s.size() || !word_char(s[p + word.size()]);
      if (starts && ends) {
        s.replace(p, word.size(), with);
        p += with.size();
      } else {
        p += word.size();
      }
    }
  };
  std::string s = sqlite_ddl;
  replace_word(s, "INTEGER", "BIGINT");
  replace_word(s, "REAL", "DOUBLE PRECISION");
  for (size_t p = s.find("WITHOUT ROWID"); p != std::string::npos; p = s.find("WITHOUT ROWID", p)) {
    size_t from = p;
    while (from > 0 && std::isspace(static_cast<unsigned char>(s[from - 1]))) --from;
    s.erase(from, p + std::strlen("WITHOUT ROWID") - from);
    p = from;
  }
  return s;
}

namespace {

int64_t table_count(Connection& c) {
  Stmt s(c, c.dialect() == Dialect::SQLite
                ? "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                : "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()");
  s.step();
  return s.i64(0);
}

}  // namespace

void create_or_check(Connection& c, const FileKind& kind) {
  const std::string what = std::string("an Orchard ") + kind.noun;
  const bool meta = c.write([&] {
    if (table_count(c) == 0) {
      c.exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      c.exec(c.dialect() == Dialect::SQLite ? std::string(kind.schema)
             : kind.postgres_schema        ? std::string(kind.postgres_schema)
                                           : to_postgres_ddl(kind.schema));
      Stmt m(c, "INSERT INTO meta(key, value) VALUES('format', ?1), ('version', ?2)");
      m.bind(1, std::string(kind.format)).bind(2, std::string(kind.version)).step();
    }
    Stmt t(c, c.dialect() == Dialect::SQLite
                  ? "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                  : "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                    "AND table_name = 'meta'");
    t.step();
    return t.i64(0) == 1;
  });
  if (!meta) throw Error(c.name() + ": not " + what + " (a database without the " + kind.noun + "'s tables)");
  Stmt f(c, "SELECT value FROM meta WHERE key = 'format'");
  const std::string format = f.step() ? f.text(0) : "";
  if (format != kind.format)
    throw Error(c.name() + ": not " + what + " (meta.format is '" + format + "', expected '" + kind.format + "')");
  auto version_now = [&] {
    Stmt v(c, "SELECT value FROM meta WHERE key = 'version'");
    return v.step() ? v.text(0) : std::string();
  };
  std::string version = version_now();
  for (size_t i = 0; i < kind.upgrades.size(); ++i) {
    const FileKind::Upgrade& step = kind.upgrades[i];
    if (version != step.from) continue;
    const std::string to = i + 1 < kind.upgrades.size() ? kind.upgrades[i + 1].from : kind.version;
    version = c.write([&] {
      // Another process may have upgraded it since: read again under the write lock.
      if (version_now() != step.from) return version_now();
      c.exec(c.dialect() == Dialect::SQLite ? std::string(step.sql) : to_postgres_ddl(step.sql));
      Stmt m(c, "UPDATE meta SET value = ?1 WHERE key = 'version'");
      m.bind(1, to).step();
      return to;
    });
  }
  if (version != kind.version)
    throw Error(c.name() + ": Orchard " + kind.noun + " version '" + version + "' is not supported (this build reads " +
                kind.version + ")");
}

}  // namespace orchard::network::sql
