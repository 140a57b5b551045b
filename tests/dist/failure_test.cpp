// Ranks in separate processes: a peer that dies, stops, disagrees or lacks
// the secret makes the others fail with a message naming it, in bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist_harness.h"
#include "process_harness.h"

namespace orchard::dist {
namespace {

using testing::Proc;
using Clock = std::chrono::steady_clock;

struct Job {
  Job(std::string b, int ranks, double timeout = 5) : backend(std::move(b)), n(ranks), timeout_s(timeout) {}
  std::string backend;
  int n;
  double timeout_s;
  std::vector<std::string> extra;  // per-job env
  int port = testing::free_port();
  std::string job = "proc-" + std::to_string(::getpid()) + "-" + std::to_string(testing::free_port());

  std::vector<std::string> env(int rank) const {
    std::vector<std::string> e = {"ORCHARD_RANK=" + std::to_string(rank), "ORCHARD_SIZE=" + std::to_string(n),
                                  "ORCHARD_COORD=127.0.0.1:" + std::to_string(port), "ORCHARD_HOST=127.0.0.1",
                                  "ORCHARD_JOB=" + job, "ORCHARD_BACKEND=" + backend,
                                  "ORCHARD_TIMEOUT_S=" + std::to_string(timeout_s), "ORCHARD_CONNECT_TIMEOUT_S=10"};
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }
  std::vector<Proc> start(const std::string& mode) const {
    std::vector<Proc> out;
    for (int r = 0; r < n; ++r)
      out.push_back(testing::spawn({ORCHARD_DIST_WORKER, mode}, env(r), job + "-" + std::to_string(r)));
    return out;
  }
};

std::vector<Proc*> ptrs(std::vector<Proc>& v) {
  std::vector<Proc*> out;
  for (auto& p : v) out.push_back(&p);
  return out;
}

// Waits until every rank printed "ready" (the group is up).
void wait_ready(std::vector<Proc>& procs) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (auto& p : procs)
    while (p.out().find("ready") == std::string::npos) {
      ASSERT_LT(Clock::now(), deadline) << "rank never became ready: " << p.err();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

class KillRank : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(KillRank, SigkillMidCollectiveFailsEveryOtherRankWithinTheTimeout) {
  const auto [backend, victim] = GetParam();
  Job job{backend, 3};
  auto procs = job.start("loop");
  wait_ready(procs);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // deep in the all_sum loop
  ::kill(procs[static_cast<size_t>(victim)].pid, SIGKILL);
  const auto killed_at = Clock::now();
  // The bound: the timeout, plus a margin for a loaded machine.
  ASSERT_TRUE(testing::wait_all(ptrs(procs), killed_at + std::chrono::milliseconds(static_cast<int>((job.timeout_s + 5) * 1000))))
      << "a rank hung after rank " << victim << " was killed";
  for (int r = 0; r < job.n; ++r) {
    if (r == victim) continue;
    const Proc& p = procs[static_cast<size_t>(r)];
    EXPECT_EQ(testing::exit_code(p), 3) << p.err();
    EXPECT_NE(p.err().find("rank " + std::to_string(victim) + " ("), std::string::npos)
        << "rank " << r << " did not name the dead rank: " << p.err();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, KillRank,
                         ::testing::Combine(::testing::Values("tcp", "shm"), ::testing::Values(0, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_kill_rank" + std::to_string(std::get<1>(info.param));
                         });

TEST(PeerFailure, StoppedRankIsReportedAsSilentAfterTheTimeout) {
  Job job{"tcp", 3, 2.0};
  auto procs = job.start("loop");
  wait_ready(procs);
  ::kill(procs[1].pid, SIGSTOP);
  std::vector<Proc*> others = {&procs[0], &procs[2]};
  const bool finished = testing::wait_all(others, Clock::now() + std::chrono::seconds(12));
  ::kill(procs[1].pid, SIGKILL);
  testing::wait_all({&procs[1]}, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(finished) << "ranks hung on a stopped peer";
  for (Proc* p : others) {
    EXPECT_EQ(testing::exit_code(*p), 3) << p->err();
    EXPECT_NE(p->err().find("rank 1 ("), std::string::npos) << p->err();
  }
  // At least one of them saw the silence itself (the other may see rank 0/2 leave).
  EXPECT_TRUE(procs[0].err().find("stopped answering") != std::string::npos ||
              procs[2].err().find("stopped answering") != std::string::npos)
      << procs[0].err() << procs[2].err();
}

class Mismatch : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Mismatch, IsReportedInsteadOfHanging) {
  const auto [backend, mode] = GetParam();
  Job job{backend, 2};
  auto procs = job.start(mode);
  ASSERT_TRUE(testing::wait_all(ptrs(procs), Clock::now() + std::chrono::seconds(20))) << "mismatch hung";
  // Every rank fails; at least one names the mismatch (the other may only
  // see its peer leave).
  bool named = false;
  for (auto& p : procs) {
    EXPECT_NE(testing::exit_code(p), 0) << p.err();
    named |= p.err().find("mismatch") != std::string::npos;
  }
  EXPECT_TRUE(named) << procs[0].err() << procs[1].err();
}

INSTANTIATE_TEST_SUITE_P(Backends, Mismatch,
                         ::testing::Combine(::testing::Values("tcp", "shm"),
                                            ::testing::Values("mismatch-size", "mismatch-op")),
                         [](const auto& info) {
                           std::string m = std::get<1>(info.param);
                           for (auto& c : m)
                             if (c == '-') c = '_';
                           return std::get<0>(info.param) + "_" + m;
                         });

TEST(Security, WrongSecretIsRefusedAndLogged) {
  Job job{"tcp", 2};
  job.timeout_s = 3;
  std::vector<Proc> procs;
  auto e0 = job.env(0);
  e0.push_back("ORCHARD_SECRET=right horse battery");
  e0.push_back("ORCHARD_CONNECT_TIMEOUT_S=3");
  auto e1 = job.env(1);
  e1.push_back("ORCHARD_SECRET=wrong");
  e1.push_back("ORCHARD_CONNECT_TIMEOUT_S=3");
  procs.push_back(testing::spawn({ORCHARD_DIST_WORKER, "check"}, e0, job.job + "-s0"));
  procs.push_back(testing::spawn({ORCHARD_DIST_WORKER, "check"}, e1, job.job + "-s1"));
  ASSERT_TRUE(testing::wait_all(ptrs(procs), Clock::now() + std::chrono::seconds(20)));
  EXPECT_EQ(testing::exit_code(procs[1]), 3);
  EXPECT_NE(procs[1].err().find("secret"), std::string::npos) << procs[1].err();
  EXPECT_NE(testing::exit_code(procs[0]), 0);
  EXPECT_NE(procs[0].err().find("refused connection"), std::string::npos) << procs[0].err();
}

TEST(Security, MatchingSecretsConnect) {
  Job job{"tcp", 3};
  job.extra = {"ORCHARD_SECRET=s3cret"};
  auto procs = job.start("check");
  ASSERT_TRUE(testing::wait_all(ptrs(procs), Clock::now() + std::chrono::seconds(60)));
  for (auto& p : procs) EXPECT_EQ(testing::exit_code(p), 0) << p.err();
}

TEST(Security, StrangerConnectionIsRefusedWhileTheJobProceeds) {
  Job job{"tcp", 2};
  auto e0 = job.env(0);
  std::vector<Proc> procs;
  procs.push_back(testing::spawn({ORCHARD_DIST_WORKER, "check"}, e0, job.job + "-x0"));
  // A stranger reaches rank 0 first and sends junk.
  net::Fd s;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  s = net::connect_to(net::Endpoint{"127.0.0.1", static_cast<uint16_t>(job.port)}, deadline);
  const char junk[128] = "GET / HTTP/1.0\r\n\r\n";
  net::write_all(s.get(), junk, sizeof junk, deadline, "stranger");
  procs.push_back(testing::spawn({ORCHARD_DIST_WORKER, "check"}, job.env(1), job.job + "-x1"));
  ASSERT_TRUE(testing::wait_all(ptrs(procs), Clock::now() + std::chrono::seconds(60)));
  for (auto& p : procs) EXPECT_EQ(testing::exit_code(p), 0) << p.err();
  EXPECT_NE(procs[0].err().find("refused connection from 127.0.0.1"), std::string::npos) << procs[0].err();
}

}  // namespace
}  // namespace orchard::dist

namespace orchard::dist {
namespace {

// Machines cabled pairwise reach each other at a different address per cable (ORCHARD_ROUTES),
// not at the one address a rank advertises. Here every rank advertises an address no machine
// has (TEST-NET-1) and routes say 127.0.0.1: the group forms only if the routes are used.
TEST(Routes, RanksReachEachOtherAtTheRoutedAddresses) {
  Job job("tcp", 3);
  job.extra = {"ORCHARD_HOST=192.0.2.7", "ORCHARD_ROUTES=0=127.0.0.1,1=127.0.0.1,2=127.0.0.1"};
  auto procs = job.start("check");
  ASSERT_TRUE(testing::wait_all(ptrs(procs), Clock::now() + std::chrono::seconds(60)));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(testing::exit_code(procs[r]), 0) << procs[r].err();
    EXPECT_NE(procs[r].out().find("all checks passed"), std::string::npos) << procs[r].out();
  }
}

TEST(Routes, MalformedRoutesAreNamed) {
  EXPECT_EQ(parse_routes("1=10.0.1.2,3=10.0.3.2", 4), (std::map<int, std::string>{{1, "10.0.1.2"}, {3, "10.0.3.2"}}));
  EXPECT_TRUE(parse_routes("", 4).empty());
  for (const char* bad : {"1", "=10.0.0.1", "4=10.0.0.1", "x=1.2.3.4", "1=", "1=a,1=b", "-1=a", "1x=a"}) {
    try {
      parse_routes(bad, 4);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("ORCHARD_ROUTES: '"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace orchard::dist
