// The replay guard: a pair is accepted once until it expires, in memory and in a database
// (SQLite and PostgreSQL), where connections and processes sharing it see one another's nonces.
#include "network/nonce_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "network/store_backends.h"
#include "network/test_files.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr int64_t kNonceNow = 1'700'000'000'000;

// The same contract for both stores.
void expect_remembers_until_expiry(NonceStore& s) {
  EXPECT_TRUE(s.remember("node-a", "n1", kNonceNow + 100, kNonceNow));
  EXPECT_FALSE(s.remember("node-a", "n1", kNonceNow + 100, kNonceNow + 50));
  EXPECT_FALSE(s.remember("node-a", "n1", kNonceNow + 100, kNonceNow + 100));  // expiry is inclusive
  EXPECT_TRUE(s.remember("node-b", "n1", kNonceNow + 100, kNonceNow));          // nonces are per node
  EXPECT_TRUE(s.remember("node-a", "n2", kNonceNow + 100, kNonceNow));
  // Past its expiry the entry is dropped (by then the timestamp check refuses the request).
  EXPECT_TRUE(s.remember("node-a", "n1", kNonceNow + 300, kNonceNow + 101));
}

TEST(NonceStore, MemoryStoreRemembersUntilExpiry) {
  MemoryNonceStore s;
  expect_remembers_until_expiry(s);
  EXPECT_EQ(s.size(), 1u);  // only the last one is unexpired at kNonceNow + 101
}

class NonceStoreTest : public test::BackendTest {};

INSTANTIATE_TEST_SUITE_P(Backends, NonceStoreTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

TEST_P(NonceStoreTest, RemembersUntilExpiry) {
  auto s = DatabaseNonceStore::open(fresh("nonces-expiry"));
  expect_remembers_until_expiry(*s);
  // Expired rows are dropped at most once a second (a statement of its own): until then they
  // stay, and the next remember a second later leaves only its own.
  EXPECT_EQ(s->size(), 3);
  EXPECT_TRUE(s->remember("node-c", "n1", kNonceNow + 2000, kNonceNow + 1001));
  EXPECT_EQ(s->size(), 1);
}

TEST_P(NonceStoreTest, IsSharedBetweenConnectionsAndSurvivesReopening) {
  const auto path = fresh("nonces-shared");
  auto one = DatabaseNonceStore::open(path);
  auto two = DatabaseNonceStore::open(path);
  EXPECT_TRUE(one->remember("node-a", "n1", kNonceNow + 1000, kNonceNow));
  EXPECT_FALSE(two->remember("node-a", "n1", kNonceNow + 1000, kNonceNow));
  EXPECT_TRUE(two->remember("node-a", "n2", kNonceNow + 1000, kNonceNow));
  EXPECT_FALSE(one->remember("node-a", "n2", kNonceNow + 1000, kNonceNow));
  one.reset();
  two.reset();
  auto reopened = DatabaseNonceStore::open(path);  // a restarted coordinator still refuses them
  EXPECT_FALSE(reopened->remember("node-a", "n1", kNonceNow + 1000, kNonceNow + 10));
}

TEST_P(NonceStoreTest, AcceptsEachNonceOnceAcrossProcesses) {
  const auto path = fresh("nonces-processes");
  DatabaseNonceStore::open(path);  // create the table once; the children race on inserts only
  constexpr int kProcesses = 4, kNonces = 150;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        auto s = DatabaseNonceStore::open(path);
        std::vector<int> order(kNonces);
        for (int i = 0; i < kNonces; ++i) order[static_cast<size_t>(i)] = i;
        std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(p)));
        for (int32_t i : order)
          if (s->remember("node-a", "nonce-" + std::to_string(i), kNonceNow + 60'000, kNonceNow))
            if (write(fds[1], &i, sizeof i) != sizeof i) _exit(3);
      } catch (...) {
        _exit(2);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::vector<int> accepted(kNonces, 0);
  int32_t i;
  while (read(fds[0], &i, sizeof i) == sizeof i) ++accepted[static_cast<size_t>(i)];
  close(fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  for (int n = 0; n < kNonces; ++n) EXPECT_EQ(accepted[static_cast<size_t>(n)], 1) << "nonce " << n;
}

TEST_P(NonceStoreTest, AcceptsEachNonceOnceAcrossThreads) {
  const auto path = fresh("nonces-threads");
  auto shared = DatabaseNonceStore::open(path);  // one connection used by several threads too
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      auto own = DatabaseNonceStore::open(path);
      NonceStore& s = t % 2 ? *own : static_cast<NonceStore&>(*shared);
      for (int i = 0; i < 100; ++i)
        if (s.remember("node-a", "nonce-" + std::to_string(i), kNonceNow + 60'000, kNonceNow)) ++accepted;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 100);
}

TEST(NonceStore, SqliteStoreRefusesAFileThatIsNotADatabase) {
  test::expect_refuses_text_file("nonces-text", [](const std::filesystem::path& p) { DatabaseNonceStore::open(p); });
}

}  // namespace
}  // namespace orchard::network
