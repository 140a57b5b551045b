// The stores' database interface on both backends: transactions roll back what a throwing
// function wrote, a transaction inside another joins it, parameters and NULLs read back the
// same, statements sent ahead run in order and fail inside their transaction, a lazy commit is
// lazy for its own transaction only, and a PostgreSQL URL's password never shows in an error.
#include "network/database.h"

#include <gtest/gtest.h>

#include "network/store_backends.h"

namespace orchard::network {
namespace {

constexpr sql::FileKind kScratch{"scratch store", "orchard-scratch", "1",
                                 "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, score REAL);"};

class DatabaseTest : public test::BackendTest {};

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

int64_t count(sql::Connection& c) {
  sql::Stmt s(c, "SELECT count(*) FROM items");
  s.step();
  return s.i64(0);
}

TEST_P(DatabaseTest, AThrowingTransactionLeavesNothingAndAnInnerOneJoinsTheOuter) {
  auto c = sql::open_database(fresh("db-txn"), kScratch);
  EXPECT_THROW(c->write([&] {
    sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'a')").step();
    c->write([&] { sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(2, 'b')").step(); });
    throw Error("changed my mind");
  }),
               Error);
  EXPECT_EQ(count(*c), 0);
  EXPECT_FALSE(c->in_transaction());
  const int64_t changed = c->write([&] {
    c->write([&] { sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'a')").step(); });
    sql::Stmt up(*c, "UPDATE items SET name = ?1 WHERE id >= ?2");
    return up.bind(1, std::string("z")).bind(2, int64_t{1}).changes();
  });
  EXPECT_EQ(changed, 1);
  EXPECT_EQ(count(*c), 1);
}

TEST_P(DatabaseTest, ValuesReadBackAsBound) {
  auto c = sql::open_database(fresh("db-values"), kScratch);
  sql::Stmt ins(*c, "INSERT INTO items(id, name, score) VALUES(?1, ?2, ?3), (?4, NULL, NULL)");
  ins.bind(1, int64_t{9'007'199'254'740'993}).bind(2, std::string("it's \"quoted\" ?1")).bind(3, 0.1 + 0.2);
  EXPECT_EQ(ins.bind(4, int64_t{-1}).changes(), 2);
  sql::Stmt s(*c, "SELECT id, name, score FROM items ORDER BY id");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i64(0), -1);
  EXPECT_TRUE(s.null(1));
  EXPECT_EQ(s.text(1), "");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i64(0), 9'007'199'254'740'993);
  EXPECT_EQ(s.text(1), "it's \"quoted\" ?1");
  EXPECT_EQ(s.f64(2), 0.1 + 0.2);  // exactly: 17 digits each way
  EXPECT_FALSE(s.step());
  EXPECT_THROW(s.i64(0), Error);  // past the last row
}

TEST_P(DatabaseTest, SentStatementsRunInOrderWithTheNextOneRead) {
  auto c = sql::open_database(fresh("db-sent"), kScratch);
  c->write([&] {
    sql::Stmt a(*c, "INSERT INTO items(id, name) VALUES(?1, ?2)");
    a.bind(1, int64_t{1}).bind(2, std::string("a")).send();
    sql::Stmt between(*c, "SELECT count(*) FROM items");
    between.send();
    sql::Stmt b(*c, "INSERT INTO items(id, name) VALUES(2, 'b') RETURNING id");
    b.send();
    sql::Stmt all(*c, "SELECT name FROM items ORDER BY id");
    ASSERT_TRUE(all.step());
    EXPECT_EQ(all.text(0), "a");
    ASSERT_TRUE(all.step());
    EXPECT_EQ(all.text(0), "b");
    ASSERT_TRUE(between.step());
    EXPECT_EQ(between.i64(0), 1);  // after the first insert, before the second
    ASSERT_TRUE(b.step());
    EXPECT_EQ(b.i64(0), 2);
    EXPECT_THROW(b.send(), Error);  // once only
  });
  EXPECT_EQ(count(*c), 2);
  // Outside a transaction a sent statement runs at once.
  sql::Stmt(*c, "DELETE FROM items WHERE id = 2").send();
  EXPECT_EQ(count(*c), 1);
}

TEST_P(DatabaseTest, ASentStatementsFailureIsThrownInsideItsTransaction) {
  auto c = sql::open_database(fresh("db-sent-fails"), kScratch);
  // PostgreSQL holds a sent statement back: a syntax error is thrown only by the read after it,
  // and everything the transaction did is undone. (SQLite throws at once: also inside.)
  bool sent = false;
  try {
    c->write([&] {
      sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'a')").send();
      sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'the same id')").send();
      sent = true;
      sql::Stmt after(*c, "SELECT count(*) FROM items");
      after.step();
      ADD_FAILURE() << "read past a failed statement";
    });
    ADD_FAILURE() << "no error";
  } catch (const sql::SqlError& e) {
    if (!sqlite()) {
      EXPECT_NE(std::string(e.what()).find("the same id"), std::string::npos) << e.what();  // which one
    }
  }
  EXPECT_EQ(sent, !sqlite());
  EXPECT_FALSE(c->in_transaction());
  EXPECT_EQ(count(*c), 0);
  c->write([&] { sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'a')").send(); });  // the connection goes on
  EXPECT_EQ(count(*c), 1);
}

TEST_P(DatabaseTest, ALazyCommitIsLazyForItsOwnTransactionOnly) {
  auto c = sql::open_database(fresh("db-lazy"), kScratch);
  auto synchronous_commit = [&] {
    sql::Stmt s(*c, "SHOW synchronous_commit");
    s.step();
    return s.text(0);
  };
  c->write([&] {
    c->commit_lazily();
    sql::Stmt(*c, "INSERT INTO items(id, name) VALUES(1, 'a')").send();
    if (!sqlite()) {
      EXPECT_EQ(synchronous_commit(), "off");
    }
  });
  EXPECT_EQ(count(*c), 1);
  c->commit_lazily();  // outside a transaction: nothing to do
  if (!sqlite()) {
    EXPECT_EQ(synchronous_commit(), "on");
  }
}

TEST_P(DatabaseTest, PlanningOnceHoldsForItsOwnTransactionOnly) {
  auto c = sql::open_database(fresh("db-plan-once"), kScratch);
  auto setting = [&](const char* name) {
    sql::Stmt s(*c, std::string("SHOW ") + name);
    s.step();
    return s.text(0);
  };
  for (int i = 0; i < 2; ++i)  // the second time, its statements' plans are the kept ones
    c->write([&] {
      c->plan_once();
      sql::Stmt add(*c, "INSERT INTO items(id, name) VALUES(?1, ?2)");
      add.bind(1, int64_t{i + 1}).bind(2, std::string("x")).send();
      sql::Stmt read(*c, "SELECT name FROM items WHERE id > ?1 ORDER BY id");
      read.bind(1, int64_t{i});
      ASSERT_TRUE(read.step());
      EXPECT_EQ(read.text(0), "x");
      EXPECT_FALSE(read.step());
      if (!sqlite()) {
        EXPECT_EQ(setting("plan_cache_mode"), "force_generic_plan");
        EXPECT_EQ(setting("enable_seqscan"), "off");
      }
    });
  EXPECT_EQ(count(*c), 2);
  if (!sqlite()) {
    EXPECT_EQ(setting("plan_cache_mode"), "force_custom_plan");
    EXPECT_EQ(setting("enable_seqscan"), "on");
  }
}

TEST_P(DatabaseTest, AStoreOfAnotherKindIsRefused) {
  const std::string at = fresh("db-kind");
  sql::open_database(at, kScratch);
  if (!sqlite()) return;  // on PostgreSQL each kind has a schema of its own: no clash
  try {
    sql::open_database(at, {"ledger", "orchard-ledger", "1", ""});
    ADD_FAILURE() << "opened a scratch store as a ledger";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("meta.format is 'orchard-scratch'"), std::string::npos) << e.what();
  }
}

TEST(Database, APostgresUrlsPasswordStaysOutOfErrors) {
  try {
    sql::open_database("postgresql://orchard:hunter2secret@127.0.0.1:1/orchard?connect_timeout=2", kScratch);
    ADD_FAILURE() << "connected to port 1";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2secret"), std::string::npos) << e.what();
  }
}

TEST(Database, MessagesShowALocationWithoutItsPassword) {
  EXPECT_EQ(sql::without_password("postgresql://orchard:s3cret@db:5432/orchard?sslmode=require"),
            "postgresql://orchard:***@db:5432/orchard?sslmode=require");
  EXPECT_EQ(sql::without_password("postgres:///orchard?host=/run/postgresql&password=s3cret&user=o"),
            "postgres:///orchard?host=/run/postgresql&password=***&user=o");
  EXPECT_EQ(sql::without_password("/var/lib/orchard/jobs.sqlite"), "/var/lib/orchard/jobs.sqlite");
  EXPECT_EQ(sql::without_password("postgresql://orchard@db:5432/orchard"), "postgresql://orchard@db:5432/orchard");
  EXPECT_EQ(sql::without_password("postgresql://o:a@b@db/x?password=p&password=q"),
            "postgresql://o:***@db/x?password=***&password=***");
}

TEST(Database, SqliteDdlSpelledForPostgres) {
  EXPECT_EQ(sql::to_postgres_ddl("CREATE TABLE t(a INTEGER NOT NULL, b REAL, c TEXT, PRIMARY KEY(a)) WITHOUT ROWID;"),
            "CREATE TABLE t(a BIGINT NOT NULL, b DOUBLE PRECISION, c TEXT, PRIMARY KEY(a));");
  // Whole words only.
  EXPECT_EQ(sql::to_postgres_ddl("CREATE TABLE realm(integers TEXT, x_REAL INTEGER)\n  WITHOUT ROWID"),
            "CREATE TABLE realm(integers TEXT, x_REAL BIGINT)");
}

}  // namespace
}  // namespace orchard::network
