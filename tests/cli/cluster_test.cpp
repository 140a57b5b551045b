// `orchard cluster up` as users run it on several machines: members find each other, measure
// every link they were heard on and plan over the fastest path of each pair; strangers (another
// secret) are ignored and logged, another version is refused by name, and a killed member is
// forgotten. Once on one machine over loopback, once on four "hosts" (network namespaces) where
// every pair is joined by two links, one slowed with tc (netem's delay and rate, or tbf's rate
// where the kernel has no netem): there the leader serves a pipeline over all four, a member
// killed mid-stream ends the stream cleanly, and the three left serve again.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/cli_run.h"
#include "dist/process_harness.h"
#include "parallel/discovered_cluster.h"
#include "parallel/model_cost.h"
#include "model/engine.h"
#include "model/gguf.h"
#include "test_data.h"

namespace orchard {
namespace {

using dist::testing::Proc;
using Clock = std::chrono::steady_clock;

std::string model_path() { return (test::repo_data() / "models" / "stories260K.gguf").string(); }

// `orchard cluster status --json` against the agent on `port`, inside namespace `ns` if given.
nlohmann::json cluster_status(const std::string& ns, int port) {
  const std::string cmd = (ns.empty() ? "" : "ip netns exec " + ns + " ") + test::orchard_binary() +
                          " cluster status --json --port " + std::to_string(port) + " 2>/dev/null";
  return nlohmann::json::parse(shell_output(cmd), nullptr, false);
}

// Polls until `done` holds for the agent's status (returned), or `seconds` pass (the last one).
nlohmann::json status_when(const std::string& ns, int port, const std::function<bool(const nlohmann::json&)>& done,
                           int seconds) {
  nlohmann::json s;
  for (const auto until = Clock::now() + std::chrono::seconds(seconds); Clock::now() < until;) {
    s = cluster_status(ns, port);
    if (s.is_object() && done(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return s;
}

bool every_path_measured(const nlohmann::json& s, size_t members, size_t paths_each) {
  if (s["members"].size() != members) return false;
  for (const auto& m : s["members"]) {
    if (m["paths"].size() != paths_each) return false;
    for (const auto& p : m["paths"])
      if (!p.contains("rtt_us")) return false;
  }
  return true;
}

void end_agents(std::vector<Proc>& procs) {
  for (Proc& p : procs)
    if (!p.status) ::kill(p.pid, SIGTERM);
  std::vector<Proc*> all;
  for (Proc& p : procs) all.push_back(&p);
  dist::testing::wait_all(all, Clock::now() + std::chrono::seconds(10));
}

std::string write_secret(const std::string& name, const std::string& secret) {
  const std::string path = ::testing::TempDir() + name + "-" + std::to_string(::getpid());
  std::ofstream(path) << secret << "\n";
  return path;
}

TEST(ClusterUp, MembersOnOneMachineFindEachOtherRefuseOtherVersionsAndIgnoreStrangers) {
  const std::string secret = write_secret("cluster-secret", "correct horse battery staple");
  const std::string other = write_secret("cluster-other", "another cluster's secret");
  const std::string discovery = std::to_string(dist::testing::free_port());
  std::vector<int> ports;
  std::vector<Proc> procs;
  auto agent = [&](const std::string& name, const std::string& secret_file, std::vector<std::string> extra) {
    ports.push_back(dist::testing::free_port());
    std::vector<std::string> argv = {test::orchard_binary(), "cluster", "up", "--secret-file", secret_file,
                                     "--name", name, "--port", std::to_string(ports.back()), "--probe-port", "0",
                                     "--discovery-port", discovery, "--interface", "lo", "--interval-ms", "200",
                                     "--timeout-ms", "1000", "--probe-mib", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    procs.push_back(dist::testing::spawn(argv, {}, "cluster-" + name));
  };
  agent("alpha", secret, {"-m", model_path()});
  // beta was calibrated (`orchard plan --calibrate`'s file, kept in tests/data): the others learn
  // it, the leader plans with it.
  const std::string node_file = (test::repo_data() / "node" / "calibrated-2core.json").string();
  ::setenv("ORCHARD_NODE_FILE", node_file.c_str(), 1);
  agent("beta", secret, {"-m", model_path()});
  ::unsetenv("ORCHARD_NODE_FILE");
  agent("gamma", secret, {"-m", model_path()});
  agent("stranger", other, {});
  agent("elder", secret, {"--announce-version", "0.0.9"});

  const nlohmann::json s = status_when("", ports[0], [](const nlohmann::json& j) {
    return every_path_measured(j, 2, 1) && !j["refused"].empty() && j["strangers"]["ignored"].get<int>() > 0 &&
           j["plan"].is_object() && j["plan"].contains("split");
  }, 30);
  ASSERT_TRUE(every_path_measured(s, 2, 1)) << s.dump(2) << procs[0].err();
  std::set<std::string> names;
  for (const auto& m : s["members"]) {
    names.insert(m["name"].get<std::string>());
    EXPECT_EQ(m["calibrated"].get<bool>(), m["name"] == "beta") << m.dump(2);
  }
  EXPECT_EQ(names, (std::set<std::string>{"beta", "gamma"}));
  // The leader planned beta with its calibration (fetched from beta's agent, or its own file).
  std::string beta_id;
  for (const auto& m : s["members"])
    if (m["name"] == "beta") beta_id = m["id"];
  const nlohmann::json planned = status_when("", ports[0], [&](const nlohmann::json& j) {
    return j["plan"].is_object() && j["plan"].contains("calibrated") && j["plan"]["calibrated"].size() == 1;
  }, 15);
  EXPECT_EQ(planned["plan"]["calibrated"], nlohmann::json::array({beta_id})) << planned.dump(2);
  ASSERT_EQ(s["refused"].size(), 1u) << s.dump(2);
  EXPECT_NE(s["refused"][0].get<std::string>().find("'elder'"), std::string::npos) << s.dump(2);
  EXPECT_NE(s["refused"][0].get<std::string>().find("it runs orchard 0.0.9, this machine runs orchard 0.1.0"),
            std::string::npos);
  EXPECT_GT(s["strangers"]["ignored"].get<int>(), 0);
  // Every member names the same leader.
  for (int i : {1, 2}) {
    const nlohmann::json t = status_when("", ports[static_cast<size_t>(i)], [&](const nlohmann::json& j) {
      return j["leader"] == s["leader"];
    }, 10);
    EXPECT_EQ(t["leader"], s["leader"]) << t.dump(2);
  }
  // The log says what happened, naming names.
  const std::string log = procs[0].err();
  EXPECT_NE(log.find("refused 'elder'"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored an announcement from 127.0.0.1 not signed with this cluster's secret"), std::string::npos);

  // A member killed outright (no goodbye) is forgotten after the timeout: no ghost.
  ::kill(procs[1].pid, SIGKILL);
  const nlohmann::json after = status_when("", ports[0], [](const nlohmann::json& j) {
    return j["members"].size() == 1;
  }, 15);
  ASSERT_EQ(after["members"].size(), 1u) << after.dump(2);
  EXPECT_EQ(after["members"][0]["name"], "gamma");
  EXPECT_NE(procs[0].err().find("'beta' (" ), std::string::npos);
  EXPECT_NE(procs[0].err().find("left the cluster: not heard from for"), std::string::npos) << procs[0].err();
  // One stopped politely is forgotten at once.
  ::kill(procs[2].pid, SIGTERM);
  const nlohmann::json alone = status_when("", ports[0], [](const nlohmann::json& j) { return j["members"].empty(); }, 15);
  EXPECT_TRUE(alone["members"].empty()) << alone.dump(2);
  EXPECT_NE(procs[0].err().find("'gamma' (" ), std::string::npos);
  end_agents(procs);
}

// Four hosts, each pair joined by two veth links on their own subnets: 10.240.P.0/30 fast,
// 10.241.P.0/30 slowed (netem: 1 ms each way and 100 Mbit/s; else tbf: 100 Mbit/s); a fifth host with another
// secret and a sixth with another version, each cabled to host 0.
class FourHosts {
 public:
  FourHosts() : tag_(std::to_string(::getpid() % 100000)) {}
  ~FourHosts() {
    for (int i = 0; i < 6; ++i) sh("ip netns del " + ns(i));
  }
  std::string create() {
    if (::geteuid() != 0) return "not root";
    for (int i = 0; i < 6; ++i)
      if (!sh("ip netns add " + ns(i)) || !sh("ip -n " + ns(i) + " link set lo up")) return "'ip netns add' failed";
    int pair = 0;
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b, ++pair) {
        if (!cable(a, b, "10.240." + std::to_string(pair), "")) return "cannot wire hosts " + std::to_string(a) + "-" + std::to_string(b);
        if (!cable(a, b, "10.241." + std::to_string(pair), slow_qdisc())) return "cannot slow a link with tc";
      }
    if (!cable(0, 4, "10.242.0", "") || !cable(0, 5, "10.242.1", "")) return "cannot wire hosts 4 and 5";
    return "";
  }
  std::string ns(int i) const { return "orchcl" + tag_ + "h" + std::to_string(i); }
  // Whether the slowed links have netem's delay too (kernels without sch_netem get tbf's rate
  // alone, as in the doctor test).
  bool delayed() const { return netem_; }

 private:
  std::string slow_qdisc() {
    if (!probed_) {
      probed_ = true;
      netem_ = sh("ip netns exec " + ns(0) + " tc qdisc add dev lo root netem delay 1ms") &&
               sh("ip netns exec " + ns(0) + " tc qdisc del dev lo root");
    }
    return netem_ ? "netem delay 1ms rate 100mbit" : "tbf rate 100mbit burst 32kbit latency 400ms";
  }
  bool cable(int a, int b, const std::string& net, const std::string& qdisc) {
    const std::string x = "c" + tag_ + "x" + std::to_string(links_), y = "c" + tag_ + "y" + std::to_string(links_);
    ++links_;
    bool ok = sh("ip link add " + x + " type veth peer name " + y) && sh("ip link set " + x + " netns " + ns(a)) &&
              sh("ip link set " + y + " netns " + ns(b)) && sh("ip -n " + ns(a) + " addr add " + net + ".1/30 dev " + x) &&
              sh("ip -n " + ns(b) + " addr add " + net + ".2/30 dev " + y) && sh("ip -n " + ns(a) + " link set " + x + " up") &&
              sh("ip -n " + ns(b) + " link set " + y + " up");
    if (ok && !qdisc.empty())
      ok = sh("ip netns exec " + ns(a) + " tc qdisc add dev " + x + " root " + qdisc) &&
           sh("ip netns exec " + ns(b) + " tc qdisc add dev " + y + " root " + qdisc);
    return ok;
  }
  static bool sh(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()) == 0; }
  std::string tag_;
  int links_ = 0;
  bool probed_ = false, netem_ = false;
};

TEST(ClusterUp, FourHostsWithTwoLinksPerPairPlanOverTheFastOnes) {
  FourHosts net;
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << "network namespaces unavailable: " << why;
  const std::string secret = write_secret("cluster4-secret", "four hosts");
  const std::string other = write_secret("cluster4-other", "not this cluster");
  std::vector<Proc> procs;
  for (int i = 0; i < 6; ++i) {
    std::vector<std::string> argv = {"ip", "netns", "exec", net.ns(i), test::orchard_binary(), "cluster", "up",
                                     "--secret-file", i == 4 ? other : secret, "--name", "host" + std::to_string(i),
                                     "--interval-ms", "200", "--timeout-ms", "1500", "--probe-mib", "2"};
    // A pipeline over all four (a 260K model would run whole on one machine otherwise).
    if (i < 4) argv.insert(argv.end(), {"-m", model_path(), "--parallel", "pipeline", "-t", "1"});
    if (i == 5) argv.insert(argv.end(), {"--announce-version", "0.0.9"});
    procs.push_back(dist::testing::spawn(argv, {}, "cluster4-host" + std::to_string(i)));
  }
  const nlohmann::json s = status_when(net.ns(0), 52181, [](const nlohmann::json& j) {
    return every_path_measured(j, 3, 2) && j["plan"].is_object() && j["plan"].contains("links") &&
           j["plan"]["links"].size() == 6 && !j["refused"].empty() && j["strangers"]["ignored"].get<int>() > 0;
  }, 60);
  ASSERT_TRUE(every_path_measured(s, 3, 2)) << s.dump(2) << procs[0].err();
  // Each member was heard on both links; the slowed one measures slower.
  for (const auto& m : s["members"]) {
    const auto& p = m["paths"];
    const auto& fast = p[0]["address"].get<std::string>().rfind("10.240.", 0) == 0 ? p[0] : p[1];
    const auto& slow = p[0]["address"].get<std::string>().rfind("10.240.", 0) == 0 ? p[1] : p[0];
    EXPECT_EQ(slow["address"].get<std::string>().rfind("10.241.", 0), 0u) << m.dump(2);
    if (net.delayed()) {
      EXPECT_LT(fast["rtt_us"].get<double>() + 1000, slow["rtt_us"].get<double>()) << m.dump(2);
    }
    EXPECT_GT(fast["mbit_s"].get<double>(), slow["mbit_s"].get<double>()) << m.dump(2);
  }
  // The leader's plan links every pair over its fast cable.
  const std::string leader = s["leader"].get<std::string>();
  nlohmann::json plan = s["plan"];
  ASSERT_TRUE(plan.contains("links")) << s.dump(2);
  for (const auto& l : plan["links"])
    EXPECT_EQ(l["address"].get<std::string>().rfind("10.240.", 0), 0u) << plan.dump(2);
  // ... and is what the planner chooses for those machines and links (among pipelines).
  ASSERT_TRUE(plan.contains("split")) << plan.dump(2);
  std::vector<parallel::DiscoveredMachine> machines;
  std::vector<parallel::MeasuredPath> chosen;
  for (const auto& l : plan["links"])
    chosen.push_back({l["between"][0], l["between"][1], l["address"], l["rtt_us"], l["mbit_s"]});
  // The leader first, then by memory and id, as the agent orders them (equal memory here).
  std::vector<std::pair<std::string, std::string>> ids = {{s["self"]["id"], s["self"]["name"]}};
  for (const auto& m : s["members"]) ids.emplace_back(m["id"], m["name"]);
  std::sort(ids.begin(), ids.end(), [&](const auto& a, const auto& b) {
    return (a.first == leader) != (b.first == leader) ? a.first == leader : a.first < b.first;
  });
  const uint64_t memory = s["members"][0]["memory"].get<uint64_t>();
  const int cores = s["members"][0]["cores"].get<int>();
  for (const auto& [id, name] : ids) machines.push_back({id, name, memory, cores});
  auto file = GGUFFile::open(model_path(), GGUFLoad::Map);
  const parallel::DiscoveredPlan expected =
      parallel::plan_discovered(parallel::ModelCost::from_gguf(*file), machines, chosen, {}, parallel::Kind::kPipeline);
  EXPECT_EQ(plan["split"], expected.prediction.candidate.label());
  EXPECT_EQ(plan["machines"].get<std::vector<std::string>>(), expected.machines);
  // Host 0 is cabled to the stranger and to the older version: one ignored, one refused by name.
  EXPECT_NE(s["refused"][0].get<std::string>().find("'host5'"), std::string::npos) << s.dump(2);
  EXPECT_NE(s["refused"][0].get<std::string>().find("it runs orchard 0.0.9, this machine runs orchard 0.1.0"),
            std::string::npos);
  EXPECT_EQ(s["strangers"]["from"], nlohmann::json::array({"10.242.0.2"}));
  EXPECT_NE(procs[0].err().find("ignored an announcement from 10.242.0.2"), std::string::npos) << procs[0].err();

  EXPECT_EQ(plan["split"], "pipeline 4");

  // The leader serves the split: a completion equals the model's greedy text on one machine.
  int leader_host = -1;
  for (int i = 0; i < 4; ++i)
    if (cluster_status(net.ns(i), 52181)["self"]["id"] == leader) leader_host = i;
  ASSERT_GE(leader_host, 0);
  const std::string leader_ns = net.ns(leader_host);
  const nlohmann::json running = status_when(leader_ns, 52181, [](const nlohmann::json& j) {
    return j["job"]["state"] == "running" && j["job"]["machines"].size() == 4;
  }, 60);
  ASSERT_EQ(running["job"]["state"], "running") << running.dump(2) << procs[static_cast<size_t>(leader_host)].err();
  EngineOptions eo;
  eo.model_path = model_path();
  eo.threads = 1;
  GenerateOptions g;
  g.max_tokens = 24;
  g.sampling = SamplerOptions::greedy();
  const std::string want = Engine::load(eo)->generate("Once upon a time", g).text;
  auto complete = [&](int seconds) {
    const std::string cmd = "ip netns exec " + leader_ns +
                            " curl -s -m 20 http://127.0.0.1:8080/v1/completions -d "
                            "'{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0}'";
    nlohmann::json r;
    for (const auto until = Clock::now() + std::chrono::seconds(seconds); Clock::now() < until;) {
      r = nlohmann::json::parse(shell_output(cmd), nullptr, false);
      if (r.is_object() && r.contains("choices")) return r["choices"][0]["text"].get<std::string>();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // ranks still loading
    }
    return "no answer: " + r.dump();
  };
  EXPECT_EQ(complete(60), want);
  // A chat request too: the same answer as one machine's `orchard serve` gives it.
  auto chat = [](const std::string& prefix, int port) {
    const std::string cmd = prefix + "curl -s -m 20 http://127.0.0.1:" + std::to_string(port) +
                            "/v1/chat/completions -d '{\"messages\":[{\"role\":\"user\",\"content\":"
                            "\"Tell me a story\"}],\"max_tokens\":24,\"temperature\":0}'";
    nlohmann::json r;
    for (const auto until = Clock::now() + std::chrono::seconds(30); Clock::now() < until;) {
      r = nlohmann::json::parse(shell_output(cmd), nullptr, false);
      if (r.is_object() && r.contains("choices")) return r["choices"][0]["message"]["content"].get<std::string>();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return "no answer: " + r.dump();
  };
  const int single_port = dist::testing::free_port();
  Proc single = dist::testing::spawn(
      {test::orchard_binary(), "serve", "-m", model_path(), "--port", std::to_string(single_port), "-t", "1"}, {},
      "cluster4-single");
  const std::string single_answer = chat("", single_port);
  ::kill(single.pid, SIGTERM);
  dist::testing::wait_all({&single}, Clock::now() + std::chrono::seconds(10));
  EXPECT_FALSE(single_answer.empty());
  EXPECT_EQ(chat("ip netns exec " + leader_ns + " ", 8080), single_answer);

  // A member dies mid-stream (every process on its host killed): the stream ends cleanly, with
  // its end or an error naming the rank; the others forget the host, plan again and serve.
  int victim = 3;
  while (victim == leader_host) --victim;
  Proc stream = dist::testing::spawn(
      {"ip", "netns", "exec", leader_ns, "curl", "-sN", "-m", "60", "http://127.0.0.1:8080/v1/completions", "-d",
       R"({"prompt":"Once upon a time","max_tokens":1900,"temperature":0,"stream":true})"},
      {}, "cluster4-stream");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::system(("ip netns pids " + net.ns(victim) + " | xargs -r kill -9").c_str());
  ASSERT_TRUE(dist::testing::wait_all({&stream}, Clock::now() + std::chrono::seconds(90)));
  const std::string streamed = stream.out();
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed.substr(streamed.size() > 2000 ? streamed.size() - 2000 : 0);
  EXPECT_TRUE(streamed.find("\"finish_reason\":\"length\"") != std::string::npos ||
              streamed.find("closed its connection") != std::string::npos ||
              streamed.find("stopped answering") != std::string::npos)
      << streamed.substr(streamed.size() > 2000 ? streamed.size() - 2000 : 0);
  const std::string gone = "host" + std::to_string(victim);
  const auto killed_at = Clock::now();
  const nlohmann::json after = status_when(leader_ns, 52181, [](const nlohmann::json& j) {
    return j["members"].size() == 2 && j["job"]["state"] == "running" && j["job"]["machines"].size() == 3;
  }, 60);
  ASSERT_EQ(after["members"].size(), 2u) << after.dump(2);
  for (const auto& m : after["members"]) EXPECT_NE(m["name"], gone);
  EXPECT_EQ(after["job"]["machines"].size(), 3u) << after.dump(2);
  EXPECT_EQ(after["plan"]["links"].size(), 3u) << after.dump(2);
  EXPECT_EQ(complete(60), want);
  // For the notes, not asserted (this host is shared): how long serving took to come back.
  std::printf("[ serving again %.1f s after the kill ]\n",
              std::chrono::duration<double>(Clock::now() - killed_at).count());
  const std::string leader_log = procs[static_cast<size_t>(leader_host)].err();
  EXPECT_NE(leader_log.find("'" + gone + "' ("), std::string::npos) << leader_log;
  EXPECT_NE(leader_log.find("stopping job"), std::string::npos) << leader_log;

  // The host comes back: it rejoins, and once idle the leader runs the four-machine plan again.
  procs.push_back(dist::testing::spawn(
      {"ip", "netns", "exec", net.ns(victim), test::orchard_binary(), "cluster", "up", "--secret-file", secret, "--name",
       gone, "--interval-ms", "200", "--timeout-ms", "1500", "--probe-mib", "2", "-m", model_path(), "--parallel",
       "pipeline", "-t", "1"},
      {}, "cluster4-back"));
  const nlohmann::json back = status_when(leader_ns, 52181, [](const nlohmann::json& j) {
    return j["members"].size() == 3 && j["job"]["state"] == "running" && j["job"]["machines"].size() == 4;
  }, 60);
  EXPECT_EQ(back["job"]["machines"].size(), 4u) << back.dump(2);
  EXPECT_EQ(complete(60), want);
  end_agents(procs);
}

}  // namespace
}  // namespace orchard
