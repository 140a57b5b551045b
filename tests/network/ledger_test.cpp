// The credit ledger: payments, exactly-once, append-only, tamper detection, signed heads,
// durability across SIGKILL, and `orchard network ledger --verify`. The tests of the ledger's
// own rules run on SQLite and PostgreSQL; those about files, on SQLite.
#include "network/ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_run.h"
#include "network/protocol_names.h"
#include "network/store_backends.h"
#include "network/test_files.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

namespace fs = std::filesystem;

// A fresh ledger path per test (and its WAL companions removed).
std::string fresh_path(const std::string& name) {
  const std::string p = ::testing::TempDir() + "orchard-ledger-" + name + "-" + std::to_string(::getpid()) + ".sqlite";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(p + suffix);
  return p;
}

nlohmann::json details(int prompt, int generated) {
  return to_json(JobUsage{static_cast<uint64_t>(prompt), static_cast<uint64_t>(generated), SizeClass::Small,
                          HardwareClass::Desktop, false});
}

using test::raw_exec;
using test::tamper;

class LedgerTest : public test::BackendTest {
 protected:
  std::string fresh_path(const std::string& name) { return fresh("ledger-" + name); }
};

INSTANTIATE_TEST_SUITE_P(Backends, LedgerTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

bool mentions(const VerifyReport& r, const std::string& needle) {
  return std::any_of(r.violations.begin(), r.violations.end(),
                     [&](const std::string& v) { return v.find(needle) != std::string::npos; });
}

std::string all_violations(const VerifyReport& r) {
  std::string s;
  for (const auto& v : r.violations) s += v + "\n";
  return s;
}

// Five jobs: client-a and client-b pay owner-x and owner-y.
void pay_five(Ledger& l) {
  l.pay("job-1", 1, "client-a", "owner-x", 100, details(10, 20));
  l.pay("job-2", 1, "client-b", "owner-x", 250, details(10, 20));
  l.pay("job-3", 1, "client-a", "owner-y", 300, details(10, 20));
  l.pay("job-4", 2, "client-b", "owner-y", 50, details(10, 20));
  l.pay("job-5", 1, "client-a", "owner-x", 75, details(10, 20));
}

TEST_P(LedgerTest, PaysAndBalancesSumToZero) {
  const auto path = fresh_path("pay");
  auto l = Ledger::open(path);
  EXPECT_EQ(l.head().seq, 0);
  pay_five(l);
  EXPECT_EQ(l.balance("client-a"), -475);
  EXPECT_EQ(l.balance("client-b"), -300);
  EXPECT_EQ(l.balance("owner-x"), 425);
  EXPECT_EQ(l.balance("owner-y"), 350);
  EXPECT_EQ(l.balance("nobody"), 0);
  int64_t sum = 0;
  for (const auto& a : l.accounts()) sum += l.balance(a);
  EXPECT_EQ(sum, 0);
  const auto xs = l.entries_for("owner-x");
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_EQ(xs[0].job_id, "job-1");
  EXPECT_EQ(xs[2].job_id, "job-5");
  EXPECT_EQ(nlohmann::json::parse(xs[0].details)["hardware"], "desktop");
  const Head h = l.head();
  EXPECT_EQ(h.seq, 5);
  EXPECT_EQ(h.hash, l.entry_for_job("job-5")->hash);
  EXPECT_EQ(l.entry_for_job("job-2")->prev_hash, l.entry_for_job("job-1")->hash);
  EXPECT_EQ(l.entry_for_job("job-1")->prev_hash, std::string(64, '0'));
  const auto r = l.verify();
  EXPECT_TRUE(r.ok()) << all_violations(r);
  EXPECT_EQ(r.entries, 5);
}

TEST_P(LedgerTest, EntriesRangeIsTheChainSegmentInOrder) {
  auto l = Ledger::open(fresh_path("range"));
  EXPECT_TRUE(l.entries_range(1, 10).empty());
  pay_five(l);
  const auto mid = l.entries_range(2, 4);
  ASSERT_EQ(mid.size(), 3u);
  EXPECT_EQ(mid[0].seq, 2);
  EXPECT_EQ(mid[2].seq, 4);
  EXPECT_EQ(mid[1].prev_hash, mid[0].hash);
  EXPECT_EQ(mid[2].hash, l.entry_for_job("job-4")->hash);
  EXPECT_EQ(mid[1].details, l.entry_for_job("job-3")->details);
  EXPECT_EQ(l.entries_range(4, 99).size(), 2u);  // up to the head
  EXPECT_TRUE(l.entries_range(6, 9).empty());
  EXPECT_TRUE(l.entries_range(4, 3).empty());
}

TEST_P(LedgerTest, RefusesBadPayments) {
  auto l = Ledger::open(fresh_path("bad"));
  EXPECT_THROW(l.pay("j", 1, "a", "b", 0, {}), Error);
  EXPECT_THROW(l.pay("j", 1, "a", "b", -5, {}), Error);
  EXPECT_THROW(l.pay("j", 1, "a", "a", 5, {}), Error);
  EXPECT_THROW(l.pay("", 1, "a", "b", 5, {}), Error);
  EXPECT_EQ(l.head().seq, 0);
}

TEST_P(LedgerTest, PayingAJobAgainReturnsTheFirstPayment) {
  auto l = Ledger::open(fresh_path("once"));
  const auto first = l.pay("job-7", 1, "client", "owner", 100, details(1, 2));
  EXPECT_TRUE(first.inserted);
  // A retry, and a second attempt of the same job on another node, pay nothing more.
  const auto again = l.pay("job-7", 1, "client", "owner", 100, details(1, 2));
  const auto second_attempt = l.pay("job-7", 2, "client", "other-owner", 999, details(1, 2));
  EXPECT_FALSE(again.inserted);
  EXPECT_FALSE(second_attempt.inserted);
  EXPECT_EQ(second_attempt.entry.seq, first.entry.seq);
  EXPECT_EQ(second_attempt.entry.payee, "owner");
  EXPECT_EQ(l.head().seq, 1);
  EXPECT_EQ(l.balance("owner"), 100);
  EXPECT_EQ(l.balance("other-owner"), 0);
}

TEST_P(LedgerTest, ConcurrentWritersPayEachJobOnce) {
  const auto path = fresh_path("concurrent");
  Ledger::open(path);  // create the schema once; the writers race on payments only
  constexpr int kThreads = 8, kJobs = 120;
  std::atomic<int> inserted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto l = Ledger::open(path);
        std::vector<int> jobs(kJobs);
        for (int i = 0; i < kJobs; ++i) jobs[static_cast<size_t>(i)] = i;
        std::shuffle(jobs.begin(), jobs.end(), std::mt19937(static_cast<unsigned>(t)));
        // Each thread pays an overlapping half of the jobs, in its own order.
        for (int j : jobs) {
          if ((j + t) % 2) continue;
          if (l.pay("job-" + std::to_string(j), t, "client", "owner-" + std::to_string(t), 10 + j, {}).inserted)
            ++inserted;
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(inserted.load(), kJobs);
  auto l = Ledger::open(path);
  EXPECT_EQ(l.head().seq, kJobs);
  for (int j = 0; j < kJobs; ++j) EXPECT_TRUE(l.entry_for_job("job-" + std::to_string(j))) << j;
  const auto r = l.verify();
  EXPECT_TRUE(r.ok()) << all_violations(r);
  EXPECT_EQ(l.balance("client"), -(10 * kJobs + kJobs * (kJobs - 1) / 2));
}

TEST_P(LedgerTest, ConcurrentOpensOfANewFileCreateOneLedger) {
  const auto path = fresh_path("concurrent-open");
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto l = Ledger::open(path);
        l.pay("job-" + std::to_string(t), 1, "client", "owner", 1, {});
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  auto l = Ledger::open(path);
  EXPECT_EQ(l.head().seq, 8);
  EXPECT_TRUE(l.verify().ok());
}

TEST_P(LedgerTest, TriggersRefuseUpdateAndDelete) {
  const auto path = fresh_path("append-only");
  {
    auto l = Ledger::open(path);
    pay_five(l);
    l.sign_head(generate_ed25519_key().get());
  }
  EXPECT_NE(raw_exec(path, "UPDATE entries SET amount = 1 WHERE seq = 2").find("append-only"), std::string::npos);
  EXPECT_NE(raw_exec(path, "DELETE FROM entries WHERE seq = 5").find("append-only"), std::string::npos);
  EXPECT_NE(raw_exec(path, "DELETE FROM signed_heads").find("append-only"), std::string::npos);
  if (!sqlite()) {  // TRUNCATE skips PostgreSQL's row triggers: statement ones refuse it
    EXPECT_NE(raw_exec(path, "TRUNCATE entries").find("append-only"), std::string::npos);
    EXPECT_NE(raw_exec(path, "TRUNCATE signed_heads").find("append-only"), std::string::npos);
  }
  auto l = Ledger::open(path);
  EXPECT_EQ(l.head().seq, 5);
  EXPECT_EQ(l.balance("client-b"), -300);
  EXPECT_TRUE(l.verify().ok());
}

TEST_P(LedgerTest, VerifyFindsAnAlteredAmount) {
  const auto path = fresh_path("tamper-amount");
  { auto l = Ledger::open(path); pay_five(l); }
  tamper(path, "UPDATE entries SET amount = 5000 WHERE seq = 3");
  const auto r = Ledger::open(path).verify();
  EXPECT_TRUE(mentions(r, "hash mismatch at seq 3")) << all_violations(r);
  EXPECT_TRUE(mentions(r, "append-only trigger 'entries_no_update' is missing")) << all_violations(r);
  EXPECT_FALSE(mentions(r, "seq 2:")) << all_violations(r);
}

TEST_P(LedgerTest, VerifyFindsAnAlteredHash) {
  const auto path = fresh_path("tamper-hash");
  { auto l = Ledger::open(path); pay_five(l); }
  tamper(path, "UPDATE entries SET hash = '" + std::string(64, 'a') + "' WHERE seq = 2");
  const auto r = Ledger::open(path).verify();
  EXPECT_TRUE(mentions(r, "hash mismatch at seq 2")) << all_violations(r);
  EXPECT_TRUE(mentions(r, "chain broken at seq 3")) << all_violations(r);
}

TEST_P(LedgerTest, VerifyFindsADeletedEntry) {
  const auto path = fresh_path("tamper-delete");
  { auto l = Ledger::open(path); pay_five(l); }
  tamper(path, "DELETE FROM entries WHERE seq = 3");
  const auto r = Ledger::open(path).verify();
  EXPECT_TRUE(mentions(r, "chain broken at seq 4")) << all_violations(r);
  EXPECT_FALSE(mentions(r, "hash mismatch")) << all_violations(r);
}

TEST_P(LedgerTest, VerifyFindsANegativeAmountAndADuplicateJob) {
  const auto path = fresh_path("tamper-dup");
  { auto l = Ledger::open(path); pay_five(l); }
  // Rebuild the table without its UNIQUE constraint, then append a well-chained duplicate with
  // a negative amount: only verify() stands between it and the balances.
  auto l = Ledger::open(path);
  const Head h = l.head();
  Entry e{h.seq + 1, "job-2", 2, "owner-x", "client-b", -250, "{}", 1, h.hash, ""};
  e.hash = entry_hash(e);
  tamper(path,
         "CREATE TABLE e2 AS SELECT * FROM entries; DROP TABLE entries; ALTER TABLE e2 RENAME TO entries; "
         "INSERT INTO entries VALUES(" + std::to_string(e.seq) + ", 'job-2', 2, 'owner-x', 'client-b', -250, '{}', 1, '" +
             e.prev_hash + "', '" + e.hash + "')");
  const auto r = Ledger::open(path).verify();
  EXPECT_TRUE(mentions(r, "amount not positive at seq 6")) << all_violations(r);
  EXPECT_TRUE(mentions(r, "duplicate job 'job-2' at seq 6 (first paid at seq 2)")) << all_violations(r);
  EXPECT_FALSE(mentions(r, "hash mismatch")) << all_violations(r);
}

TEST_P(LedgerTest, SignedHeadVerifiesWithTheRightKeyOnly) {
  const auto path = fresh_path("sign");
  auto l = Ledger::open(path);
  pay_five(l);
  const auto key = generate_ed25519_key();
  const auto pub = public_key_from_hex(public_key_hex(key.get()));
  const auto other = generate_ed25519_key();
  std::string why;
  EXPECT_FALSE(l.verify_head_signature(pub.get(), &why));
  EXPECT_NE(why.find("no signed head"), std::string::npos) << why;
  const auto sh = l.sign_head(key.get());
  EXPECT_EQ(sh.seq, 5);
  EXPECT_EQ(sh.hash, l.head().hash);
  EXPECT_TRUE(l.verify_head_signature(pub.get(), &why)) << why;
  EXPECT_FALSE(l.verify_head_signature(other.get(), &why));
  EXPECT_NE(why.find("another key"), std::string::npos) << why;
  // Later payments extend the chain; the signed head still pins seq 5.
  l.pay("job-6", 1, "client-a", "owner-y", 10, {});
  EXPECT_TRUE(l.verify_head_signature(pub.get(), &why)) << why;
  EXPECT_TRUE(l.verify(pub.get()).ok());
  const auto r = l.verify(other.get());
  EXPECT_TRUE(mentions(r, "signed head at seq 5: signed by another key")) << all_violations(r);
}

TEST_P(LedgerTest, SignedHeadAlteredAfterSigningFails) {
  const auto path = fresh_path("sign-tamper");
  const auto key = generate_ed25519_key();
  { auto l = Ledger::open(path); pay_five(l); l.sign_head(key.get()); }
  // Claim a different hash for the signed seq: the signature no longer covers it.
  tamper(path, "UPDATE signed_heads SET hash = '" + std::string(64, 'b') + "'");
  auto l = Ledger::open(path);
  std::string why;
  EXPECT_FALSE(l.verify_head_signature(key.get(), &why));
  EXPECT_NE(why.find("signature does not verify"), std::string::npos) << why;
  EXPECT_TRUE(mentions(l.verify(), "signed head at seq 5: signature does not verify"));
}

TEST_P(LedgerTest, RewritingASignedEntryConsistentlyIsCaughtByTheSignature) {
  const auto path = fresh_path("sign-rewrite");
  const auto key = generate_ed25519_key();
  Entry last;
  {
    auto l = Ledger::open(path);
    pay_five(l);
    l.sign_head(key.get());
    last = *l.entry_for_job("job-5");
  }
  // Raise the last entry's amount and recompute its hash: the chain alone still looks whole.
  last.amount = 1'000'000;
  last.hash = entry_hash(last);
  tamper(path, "UPDATE entries SET amount = 1000000, hash = '" + last.hash + "' WHERE seq = 5");
  auto l = Ledger::open(path);
  const auto r = l.verify();
  EXPECT_FALSE(mentions(r, "hash mismatch")) << all_violations(r);
  EXPECT_TRUE(mentions(r, "signed head at seq 5: does not match the chain")) << all_violations(r);
  std::string why;
  EXPECT_FALSE(l.verify_head_signature(key.get(), &why));
  EXPECT_NE(why.find("does not match the chain"), std::string::npos) << why;
}

TEST(Ledger, CommittedPaymentsSurviveSigkill) {
  const auto path = fresh_path("sigkill");
  Ledger::open(path);
  std::mt19937 rng(std::random_device{}());
  const int kill_after = 200 + static_cast<int>(rng() % 300);  // reported payments before the kill
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "coordinator": pays jobs in a loop and reports each one after pay() returned.
    close(fds[0]);
    try {
      auto l = Ledger::open(path);
      for (int32_t i = 0; i < 100'000; ++i) {
        l.pay("job-" + std::to_string(i), 1, "client-" + std::to_string(i % 3), "owner-" + std::to_string(i % 5),
              1 + i % 97, details(i, 2 * i));
        if (write(fds[1], &i, sizeof i) != sizeof i) _exit(3);
      }
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  std::set<int32_t> reported;
  int32_t i;
  bool killed = false;
  while (read(fds[0], &i, sizeof i) == sizeof i) {
    reported.insert(i);
    if (!killed && static_cast<int>(reported.size()) >= kill_after) {
      kill(child, SIGKILL);  // lands mid-transaction or between payments, wherever it falls
      killed = true;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended on its own: " << status;
  ASSERT_GE(static_cast<int>(reported.size()), kill_after);

  // The restarted coordinator: everything reported is there once, and paying it all again
  // (it cannot know what was in flight) adds only what was never committed.
  auto l = Ledger::open(path);
  auto r = l.verify();
  EXPECT_TRUE(r.ok()) << all_violations(r);
  const int64_t committed = l.head().seq;
  EXPECT_GE(committed, static_cast<int64_t>(reported.size()));
  EXPECT_LE(committed, static_cast<int64_t>(reported.size()) + 1);  // at most the one in flight
  for (int32_t job : reported) EXPECT_TRUE(l.entry_for_job("job-" + std::to_string(job))) << job;
  int fresh = 0;
  for (int32_t job = 0; job < committed + 5; ++job)
    fresh += l.pay("job-" + std::to_string(job), 2, "client-" + std::to_string(job % 3),
                   "owner-" + std::to_string(job % 5), 1 + job % 97, {})
                 .inserted;
  EXPECT_EQ(fresh, 5);
  EXPECT_EQ(l.head().seq, committed + 5);
  r = l.verify();
  EXPECT_TRUE(r.ok()) << all_violations(r);
}

TEST(Ledger, RefusesAFileThatIsNotALedger) {
  const auto text = fresh_path("not-sqlite");
  std::ofstream(text) << "this is a text file, not a ledger, and it is long enough to have a header.\n";
  try {
    Ledger::open(text);
    FAIL() << "opened a text file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an Orchard ledger"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
  const auto other = fresh_path("other-db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "CREATE TABLE songs(title TEXT)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    Ledger::open(other);
    FAIL() << "opened someone else's database";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an Orchard ledger"), std::string::npos) << e.what();
  }
}

TEST(Ledger, CorruptFileIsAnErrorOrAViolationNeverACrash) {
  const auto path = fresh_path("corrupt");
  {
    auto l = Ledger::open(path);
    for (int i = 0; i < 300; ++i) l.pay("job-" + std::to_string(i), 1, "c", "o", 5, details(i, i));
  }  // the last connection closing checkpoints the WAL into the main file
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 8192u);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 100);
    const std::string junk(4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  try {
    auto l = Ledger::open(path);
    EXPECT_FALSE(l.verify().ok());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(NetworkCli, VerifyExitsZeroOnAGoodLedgerAndOneNamingTheViolation) {
  const auto path = fresh_path("cli");
  {
    auto l = Ledger::open(path);
    pay_five(l);
  }
  auto out = run("network ledger --db " + path + " --verify");
  EXPECT_EQ(out.code, 0) << out.err;
  EXPECT_NE(out.out.find("ledger verifies: 5 entries"), std::string::npos) << out.out;
  out = run("network ledger --db " + path + " --balance owner-x");
  EXPECT_EQ(out.code, 0) << out.err;
  EXPECT_NE(out.out.find("owner-x: 0.000425 credits"), std::string::npos) << out.out;

  tamper(path, "UPDATE entries SET amount = 7 WHERE seq = 2");
  out = run("network ledger --db " + path + " --verify");
  EXPECT_EQ(out.code, 1);
  EXPECT_NE(out.err.find("hash mismatch at seq 2"), std::string::npos) << out.err;

  const auto text = fresh_path("cli-text");
  std::ofstream(text) << "not a ledger at all, just some words in a file that is long enough\n";
  out = run("network ledger --db " + text + " --verify");
  EXPECT_EQ(out.code, 1);
  EXPECT_NE(out.err.find("not an Orchard ledger"), std::string::npos) << out.err;

  out = run("network ledger --help");
  EXPECT_EQ(out.code, 0);
  EXPECT_NE(out.out.find("Examples:"), std::string::npos);
}

}  // namespace
}  // namespace orchard::network
