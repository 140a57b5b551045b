// Three "hosts": network namespaces joined by veth pairs to a bridge that
// lives in a fourth namespace (the machine's own network is untouched), one
// tcp rank in each, every rank listening only on its own address.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "process_harness.h"

namespace orchard::dist {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Proc;

class Namespaces {
 public:
  explicit Namespaces(int hosts) : hosts_(hosts), tag_(std::to_string(::getpid() % 100000)) {}
  ~Namespaces() {
    for (int i = 0; i < hosts_; ++i) sh("ip netns del " + ns(i));
    sh("ip netns del " + bridge());
  }
  // Empty on success, else why namespaces cannot be made here.
  std::string create() {
    if (::geteuid() != 0) return "not root";
    if (!sh("ip netns add " + bridge())) return "'ip netns add' failed (no CAP_SYS_ADMIN or no iproute2)";
    if (!sh("ip -n " + bridge() + " link add br0 type bridge") || !sh("ip -n " + bridge() + " link set br0 up"))
      return "cannot create a bridge";
    for (int i = 0; i < hosts_; ++i) {
      const std::string a = "oa" + tag_ + "x" + std::to_string(i), b = "ob" + tag_ + "x" + std::to_string(i);
      const bool ok = sh("ip netns add " + ns(i)) && sh("ip link add " + a + " type veth peer name " + b) &&
                      sh("ip link set " + a + " netns " + ns(i)) && sh("ip link set " + b + " netns " + bridge()) &&
                      sh("ip -n " + bridge() + " link set " + b + " master br0") &&
                      sh("ip -n " + bridge() + " link set " + b + " up") &&
                      sh("ip -n " + ns(i) + " addr add " + address(i) + "/24 dev " + a) &&
                      sh("ip -n " + ns(i) + " link set " + a + " up") && sh("ip -n " + ns(i) + " link set lo up");
      if (!ok) return "cannot wire namespace " + ns(i);
    }
    return "";
  }
  std::string ns(int i) const { return "orch" + tag_ + "h" + std::to_string(i); }
  static std::string address(int i) { return "10.231.0." + std::to_string(i + 1); }

 private:
  std::string bridge() const { return "orch" + tag_ + "br"; }
  static bool sh(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()) == 0; }
  int hosts_;
  std::string tag_;
};

std::vector<Proc> start_ranks(const Namespaces& net, int n, const std::string& mode, const std::string& tag) {
  std::vector<Proc> procs;
  for (int r = 0; r < n; ++r)
    procs.push_back(testing::spawn(
        {"ip", "netns", "exec", net.ns(r), ORCHARD_DIST_WORKER, mode},
        {"ORCHARD_RANK=" + std::to_string(r), "ORCHARD_SIZE=" + std::to_string(n),
         "ORCHARD_COORD=" + Namespaces::address(0) + ":29511", "ORCHARD_HOST=" + Namespaces::address(r),
         "ORCHARD_JOB=" + tag, "ORCHARD_BACKEND=tcp", "ORCHARD_TIMEOUT_S=5", "ORCHARD_CONNECT_TIMEOUT_S=20"},
        tag + "-" + std::to_string(r)));
  return procs;
}

TEST(MultiHost, TcpCollectivesAcrossThreeNetworkNamespaces) {
  Namespaces net(3);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << "network namespaces unavailable: " << why;
  auto procs = start_ranks(net, 3, "check", "netns-check-" + std::to_string(::getpid()));
  ASSERT_TRUE(testing::wait_all({&procs[0], &procs[1], &procs[2]}, Clock::now() + std::chrono::seconds(90)));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(testing::exit_code(procs[r]), 0) << procs[r].err();
    EXPECT_NE(procs[r].out().find("rank " + std::to_string(r) + " of 3 (tcp): all checks passed"), std::string::npos);
  }
}

TEST(MultiHost, KilledHostIsNamedByTheOthers) {
  Namespaces net(3);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << "network namespaces unavailable: " << why;
  auto procs = start_ranks(net, 3, "loop", "netns-kill-" + std::to_string(::getpid()));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (auto& p : procs)
    while (p.out().find("ready") == std::string::npos && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // `ip netns exec` execs the worker, so the pid is the rank itself.
  ::kill(procs[2].pid, SIGKILL);
  const bool ended = testing::wait_all({&procs[0], &procs[1], &procs[2]}, Clock::now() + std::chrono::seconds(15));
  ASSERT_TRUE(ended) << "ranks hung after rank 2 was killed; rank 0 said: " << procs[0].err()
                     << " rank 1 said: " << procs[1].err() << " rank 2 said: " << procs[2].err();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(testing::exit_code(procs[r]), 3) << procs[r].err();
    EXPECT_NE(procs[r].err().find("rank 2 (10.231.0.3:"), std::string::npos) << procs[r].err();
  }
}

}  // namespace
}  // namespace orchard::dist
