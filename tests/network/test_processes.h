#pragma once
// Real `orchard network serve` and `orchard node` processes for the network's end-to-end tests
// (coordinator_kill_test.cpp, cheating_node_test.cpp): a free port, a command run to the end, a
// coordinator waited for until enough nodes are available, a process stopped.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_harness.h"

namespace orchard::network::test {

using dist::testing::Proc;
using nlohmann::json;

using dist::testing::free_port;

// Runs `argv` to the end and returns its stdout; fails the test on a non-zero exit.
inline std::string run(const std::vector<std::string>& argv, const std::string& tag) {
  Proc p = dist::testing::spawn(argv, {}, tag);
  EXPECT_TRUE(dist::testing::wait_all({&p}, std::chrono::steady_clock::now() + std::chrono::seconds(60)));
  EXPECT_EQ(dist::testing::exit_code(p), 0) << tag << ": " << p.err();
  return p.out();
}

// A client key for `account` from `orchard network api-key create`, the store given by
// `store_args` ({"--data", DIR} or {"--db", URL}); empty (and a test failure) when none came.
inline std::string api_key(const std::string& bin, const std::string& account, const std::vector<std::string>& store_args) {
  std::vector<std::string> argv = {bin, "network", "api-key", "create", account};
  argv.insert(argv.end(), store_args.begin(), store_args.end());
  std::string key = run(argv, "api-key " + account);
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  EXPECT_FALSE(key.empty()) << "no key for " << account;
  return key;
}

inline bool healthy(int port, int nodes) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1, 0);
  auto r = c.Get("/health");
  return r && r->status == 200 && json::parse(r->body).value("nodes_available", 0) >= nodes;
}

inline void wait_healthy(int port, int nodes, const Proc& coordinator) {
  for (int i = 0; i < 600 && !healthy(port, nodes); ++i) {
    ASSERT_NE(::waitpid(coordinator.pid, nullptr, WNOHANG), coordinator.pid) << "the coordinator exited: " << coordinator.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(healthy(port, nodes)) << "no healthy coordinator with " << nodes << " nodes: " << coordinator.err();
}

inline void kill_and_wait(Proc& p, int sig) {
  ::kill(p.pid, sig);
  dist::testing::wait_all({&p}, std::chrono::steady_clock::now() + std::chrono::seconds(20));
}

}  // namespace orchard::network::test
