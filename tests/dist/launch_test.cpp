// `orchard launch` end to end: local ranks, exit codes, rank prefixes, an
// mlx.launch hostfile through an ssh stand-in, and mpirun for the mpi backend.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "dist/hostfile.h"
#include "process_harness.h"
#include "tensor/error.h"

namespace orchard::dist {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Proc;

Proc run(const std::vector<std::string>& argv, const std::string& tag, int seconds = 90,
         const std::vector<std::string>& env = {}) {
  Proc p = testing::spawn(argv, env, tag);
  EXPECT_TRUE(testing::wait_all({&p}, Clock::now() + std::chrono::seconds(seconds))) << tag << " hung";
  return p;
}

TEST(Launch, LocalRanksPassEveryCollectiveCheckOnTcpAndShm) {
  for (const char* backend : {"tcp", "shm"}) {
    Proc p = run({ORCHARD_BINARY, "launch", "-n", "4", "--backend", backend, "--", ORCHARD_DIST_WORKER, "check"},
                 std::string("launch-") + backend);
    EXPECT_EQ(testing::exit_code(p), 0) << p.out() << p.err();
    for (int r = 0; r < 4; ++r)
      EXPECT_NE(p.out().find("[" + std::to_string(r) + "] rank " + std::to_string(r) + " of 4 (" + backend + ")"),
                std::string::npos)
          << p.out();
  }
}

TEST(Launch, ReportsTheFailingRankAndReturnsItsStatus) {
  Proc p = run({ORCHARD_BINARY, "launch", "-n", "3", "--", "sh", "-c",
                "echo out-$ORCHARD_RANK; [ $ORCHARD_RANK = 1 ] && exit 7; exit 0"},
               "launch-status");
  EXPECT_EQ(testing::exit_code(p), 7);
  EXPECT_NE(p.out().find("[1] out-1"), std::string::npos) << p.out();
  EXPECT_NE(p.err().find("rank 1 (local) exited with status 7"), std::string::npos) << p.err();
}

TEST(Launch, KilledRankTakesTheJobDownWithoutHanging) {
  // Rank 1 kills itself mid-job; the others notice through the group and
  // fail; the launcher returns 128+9.
  Proc p = run({ORCHARD_BINARY, "launch", "-n", "3", "--timeout", "3", "--", "sh", "-c",
                std::string("if [ $ORCHARD_RANK = 1 ]; then (sleep 1; kill -9 $$) & fi; exec ") +
                    ORCHARD_DIST_WORKER + " loop"},
               "launch-kill", 30);
  EXPECT_EQ(testing::exit_code(p), 137) << p.err();
  EXPECT_NE(p.err().find("rank 1 (local) was killed by signal 9"), std::string::npos) << p.err();
  // The survivors said why themselves instead of being stopped by the launcher.
  EXPECT_NE(p.err().find("[0] rank error: rank 1 (127.0.0.1:"), std::string::npos) << p.err();
  EXPECT_NE(p.err().find("[2] rank error: rank 1 (127.0.0.1:"), std::string::npos) << p.err();
}

TEST(Launch, HostfileRanksStartThroughSshWithTheSecretOnStdin) {
  const std::string dir = ::testing::TempDir();
  // An ssh stand-in: drops "-o BatchMode=yes HOST" and runs the command here.
  const std::string ssh = dir + "fake-ssh";
  {
    std::ofstream f(ssh);
    f << "#!/bin/sh\nshift 3\necho \"$@\" > " << dir << "fake-ssh-last-cmd\nexec sh -c \"$1\"\n";
  }
  ::chmod(ssh.c_str(), 0755);
  const std::string hosts = dir + "hosts.json";
  {
    std::ofstream f(hosts);
    f << R"({"hosts": [{"ssh": "mac-a", "ips": ["127.0.0.1"]}, {"ssh": "mac-b", "ips": ["127.0.0.1"], "rdma": [null, "rdma_en3"]}, {"ssh": "mac-c", "ips": ["127.0.0.1"]}]})";
  }
  const std::string secret = dir + "secret";
  {
    std::ofstream f(secret);
    f << "a shared secret\n";
  }
  Proc p = run({ORCHARD_BINARY, "launch", "--hostfile", hosts, "--ssh", ssh, "--port", "0", "--secret-file", secret,
                "--", ORCHARD_DIST_WORKER, "check"},
               "launch-hostfile");
  EXPECT_EQ(testing::exit_code(p), 0) << p.out() << p.err();
  EXPECT_NE(p.out().find("[2] rank 2 of 3 (tcp): all checks passed"), std::string::npos) << p.out();
  const std::string cmd = Proc::slurp(dir + "fake-ssh-last-cmd");
  EXPECT_EQ(cmd.find("a shared secret"), std::string::npos) << "secret leaked onto the command line: " << cmd;
  EXPECT_NE(cmd.find("ORCHARD_SIZE=3"), std::string::npos) << cmd;
}

TEST(Hostfile, ParsesTheMlxShapeAndTheBareList) {
  Hostfile h = parse_hostfile(
      R"({"backend": "rdma", "hosts": [{"ssh": "m1", "ips": ["10.0.0.1"], "rdma": [null, "rdma_en2"]}, {"ssh": "m2"}]})",
      "h.json");
  ASSERT_EQ(h.hosts.size(), 2u);
  EXPECT_EQ(h.backend.value_or(""), "rdma");
  EXPECT_EQ(h.hosts[0].address(), "10.0.0.1");
  EXPECT_EQ(h.hosts[1].address(), "m2");
  ASSERT_EQ(h.hosts[0].rdma.size(), 2u);
  EXPECT_EQ(h.hosts[0].rdma[0], "");
  EXPECT_EQ(h.hosts[0].rdma[1], "rdma_en2");
  EXPECT_EQ(parse_hostfile(R"([{"ssh": "a"}, {"ssh": "b"}])", "x").hosts.size(), 2u);
}

TEST(Hostfile, RejectsMalformedFilesNamingTheProblem) {
  auto message = [](const std::string& text) {
    try {
      parse_hostfile(text, "h.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("{").find("h.json: not valid JSON"), std::string::npos);
  // A number too large for a double (found by the fuzzer).
  EXPECT_NE(message("[5555555555555555.5e5500000091662]").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"({"hosts": []})").find("non-empty"), std::string::npos);
  EXPECT_NE(message(R"({"hosts": [{"ips": ["1.2.3.4"]}]})").find("hosts[0]: missing \"ssh\""), std::string::npos);
  EXPECT_NE(message(R"({"hosts": [{"ssh": "a", "ips": "1.2.3.4"}]})").find("\"ips\" must be a list"),
            std::string::npos);
}

TEST(Mpi, RanksUnderMpirunPassEveryCollectiveCheck) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not installed";
  for (int n : {2, 3, 4, 5}) {
    // Up to 16 Mi elements, as for the other backends.
    Proc p = run({"mpirun", "--oversubscribe", "-n", std::to_string(n), ORCHARD_DIST_WORKER, "check", "16777216"},
                 "mpirun-" + std::to_string(n), 120,
                 {"ORCHARD_BACKEND=mpi", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                  "ASAN_OPTIONS=detect_leaks=0"});
    if (p.err().find("built without MPI") != std::string::npos) GTEST_SKIP() << "built without MPI";
    EXPECT_EQ(testing::exit_code(p), 0) << p.out() << p.err();
    EXPECT_NE(p.out().find("rank 0 of " + std::to_string(n) + " (mpi): all checks passed"), std::string::npos)
        << p.out();
  }
}

}  // namespace
}  // namespace orchard::dist
