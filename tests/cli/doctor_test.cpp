// `orchard doctor` as a user runs it: every check prints its outcome and, when not ok, a fix; a
// peer that is not there fails the run; a peer answering probes over loopback is measured; a
// link slowed with tc (netem, or tbf where the kernel lacks netem) between two network
// namespaces is called slow.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/cli_run.h"
#include "dist/process_harness.h"
#include "test_data.h"

namespace orchard {
namespace {

using dist::testing::Proc;

// A TCP port nothing listens on (the kernel's pick, released at once).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void stop(Proc& p) {
  ::kill(p.pid, SIGTERM);
  dist::testing::wait_all({&p}, std::chrono::steady_clock::now() + std::chrono::seconds(10));
}

TEST(Doctor, EveryCheckSaysItsOutcomeAndAFix) {
  const Out r = run("doctor --port " + std::to_string(unused_port()));
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  for (const char* check : {"system", "memory", "rdma", "interface", "port "})
    EXPECT_NE(r.out.find(check), std::string::npos) << check << " missing from:\n" << r.out;
  // This host has no RDMA device (CI's neither): the check says so and what would give one.
  if (r.out.find("warn  rdma") != std::string::npos) {
    const size_t at = r.out.find("warn  rdma");
    EXPECT_NE(r.out.find("fix: ", at), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ranks use TCP", at), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("ok    rdma"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find(" failed, "), std::string::npos) << r.out;
}

TEST(Doctor, AMissingPeerFailsTheRunWithAFix) {
  const int port = unused_port();
  const Out r = run("doctor --timeout 1 --probe-mib 1 --peer 127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("fail  peer 127.0.0.1:" + std::to_string(port)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fix: run `orchard doctor --listen` on 127.0.0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 failed"), std::string::npos) << r.out;
}

TEST(Doctor, APeerAnsweringProbesIsMeasured) {
  const int port = unused_port();
  Proc listener = dist::testing::spawn(
      {test::orchard_binary(), "doctor", "--listen", "--host", "127.0.0.1", "--port", std::to_string(port)}, {}, "doctor-listen");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Out r = run("doctor --timeout 10 --probe-mib 8 --peer 127.0.0.1:" + std::to_string(port));
  stop(listener);
  EXPECT_NE(r.out.find("peer 127.0.0.1:" + std::to_string(port)), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("round trip "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" Mbit/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fail  peer"), std::string::npos) << r.out;
}

// Two namespaces joined by one veth pair, the link slowed both ways as a slow network would.
class SlowLink {
 public:
  SlowLink() : tag_(std::to_string(::getpid() % 100000)) {}
  ~SlowLink() {
    sh("ip netns del " + ns(0));
    sh("ip netns del " + ns(1));
  }
  std::string create(const std::string& netem) {
    if (::geteuid() != 0) return "not root";
    const std::string a = "da" + tag_, b = "db" + tag_;
    if (!sh("ip netns add " + ns(0)) || !sh("ip netns add " + ns(1))) return "'ip netns add' failed";
    if (!sh("ip link add " + a + " type veth peer name " + b) || !sh("ip link set " + a + " netns " + ns(0)) ||
        !sh("ip link set " + b + " netns " + ns(1)) || !sh("ip -n " + ns(0) + " addr add 10.232.0.1/24 dev " + a) ||
        !sh("ip -n " + ns(1) + " addr add 10.232.0.2/24 dev " + b) || !sh("ip -n " + ns(0) + " link set " + a + " up") ||
        !sh("ip -n " + ns(1) + " link set " + b + " up") || !sh("ip -n " + ns(0) + " link set lo up") ||
        !sh("ip -n " + ns(1) + " link set lo up"))
      return "cannot wire the namespaces";
    // netem (delay and rate) where the kernel has it, else a token bucket (rate alone).
    for (const std::string& qdisc : {"netem " + netem, std::string("tbf rate 100mbit burst 32kbit latency 400ms")})
      if (sh("ip netns exec " + ns(0) + " tc qdisc add dev " + a + " root " + qdisc) &&
          sh("ip netns exec " + ns(1) + " tc qdisc add dev " + b + " root " + qdisc))
        return "";
    return "neither tc netem nor tbf is available";
  }
  std::string ns(int i) const { return "orchdoc" + tag_ + "n" + std::to_string(i); }

 private:
  static bool sh(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()) == 0; }
  std::string tag_;
};

TEST(Doctor, ASlowLinkIsCalledSlow) {
  SlowLink net;
  if (const std::string why = net.create("delay 2ms rate 100mbit"); !why.empty())
    GTEST_SKIP() << "network namespaces with a slowed link unavailable: " << why;
  Proc listener = dist::testing::spawn({"ip", "netns", "exec", net.ns(0), test::orchard_binary(), "doctor", "--listen",
                                        "--host", "10.232.0.1", "--port", "29600"},
                                       {}, "doctor-slow-listen");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The prober in the other namespace.
  const std::string cmd = "ip netns exec " + net.ns(1) + " " + test::orchard_binary() +
                          " doctor --timeout 20 --probe-mib 4 --peer 10.232.0.1:29600";
  const std::string out = shell_output(cmd);
  stop(listener);
  EXPECT_NE(out.find("warn  peer 10.232.0.1:29600"), std::string::npos) << out;
  EXPECT_NE(out.find("slow for a split model"), std::string::npos) << out;
  EXPECT_NE(out.find("fix: is this the fast path?"), std::string::npos) << out;
}

}  // namespace
}  // namespace orchard
