// `orchard cluster up`: join (or start) the cluster of machines on the local networks that share
// a secret — they find each other, measure their links and agree on a leader, whose planner
// picks the split. `orchard cluster status`: what the agent on this machine knows.
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <map>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "parallel/plan.h"
#include "serve/cluster_agent.h"
#include "serve/server.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

std::atomic<bool> g_cluster_stop{false};
void stop_cluster(int) { g_cluster_stop = true; }

std::string size_gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return b;
}

void print_status(const nlohmann::json& s) {
  const auto& self = s["self"];
  std::map<std::string, std::string> name{{self["id"].get<std::string>(), self["name"].get<std::string>()}};
  for (const auto& m : s["members"]) name[m["id"].get<std::string>()] = m["name"].get<std::string>();
  auto who = [&](const nlohmann::json& id) {
    const auto it = name.find(id.get<std::string>());
    return it == name.end() ? id.get<std::string>() : it->second;
  };
  std::printf("this machine: %s (%s), orchard %s; leader: %s\n", self["name"].get<std::string>().c_str(),
              self["id"].get<std::string>().c_str(), self["version"].get<std::string>().c_str(),
              s["leader"] == self["id"] ? "this machine" : who(s["leader"]).c_str());
  std::printf("members (a silent one is forgotten after %lld ms):\n", s["timeout_ms"].get<long long>());
  if (s["members"].empty()) std::printf("  none heard yet\n");
  for (const auto& m : s["members"]) {
    std::printf("  %-16s %s  orchard %s, %d cores, %s, %s, model %s\n", m["name"].get<std::string>().c_str(),
                m["id"].get<std::string>().c_str(), m["version"].get<std::string>().c_str(), m["cores"].get<int>(),
                size_gib(m["memory"].get<uint64_t>()).c_str(),
                m.value("calibrated", false) ? "calibrated" : "not calibrated",
                m["model"].get<std::string>().empty() ? "-" : m["model"].get<std::string>().c_str());
    if (m.contains("rdma") && !m["rdma"].empty()) std::printf("    RDMA devices: %s\n", m["rdma"].dump().c_str());
    for (const auto& p : m["paths"]) {
      std::string measured = "not measured yet";
      if (p.contains("rtt_us"))
        measured = std::to_string(std::lround(p["rtt_us"].get<double>())) + " µs round trip, " +
                   std::to_string(std::lround(p["mbit_s"].get<double>())) + " Mbit/s";
      else if (p.contains("error"))
        measured = "probe failed: " + p["error"].get<std::string>();
      std::printf("    via %-15s (from %-15s) %s\n", p["address"].get<std::string>().c_str(),
                  p["local"].get<std::string>().c_str(), measured.c_str());
    }
  }
  for (const auto& r : s["refused"]) std::printf("refused: %s\n", r.get<std::string>().c_str());
  if (s["strangers"]["ignored"].get<uint64_t>() > 0)
    std::printf("ignored %llu announcements not signed with this cluster's secret (from %s)\n",
                static_cast<unsigned long long>(s["strangers"]["ignored"].get<uint64_t>()),
                s["strangers"]["from"].dump().c_str());
  const auto& plan = s["plan"];
  if (plan.is_null()) {
    std::printf("plan: none yet\n");
  } else if (plan.contains("error")) {
    std::printf("plan: none: %s\n", plan["error"].get<std::string>().c_str());
  } else {
    std::printf("plan: %s\n", plan["why"].get<std::string>().c_str());
    std::string order;
    for (const auto& id : plan["machines"]) order += (order.empty() ? "" : ", ") + who(id);
    std::printf("  machines, rank order: %s\n", order.c_str());
  }
  const auto& job = s["job"];
  if (job.is_object() && job.contains("split")) {
    std::string order;
    for (const auto& id : job["machines"]) order += (order.empty() ? "" : ", ") + who(id);
    std::string backend = job.value("backend", std::string());
    if (backend.empty()) backend = "one machine";
    std::printf("running: %s over %s (%s), job %s, API %s\n", job["split"].get<std::string>().c_str(), order.c_str(),
                backend.c_str(), job["id"].get<std::string>().c_str(), job.value("api", std::string()).c_str());
  } else if (job.is_object()) {
    std::printf("running: %s\n", job.value("state", std::string("none")).c_str());
  }
  if (plan.is_object() && plan.contains("links"))
    for (const auto& l : plan["links"])
      std::printf("  link %s - %s over %s: %.0f µs round trip, %.0f Mbit/s\n", who(l["between"][0]).c_str(),
                  who(l["between"][1]).c_str(),
                  l["address"].get<std::string>().c_str(), l["rtt_us"].get<double>(), l["mbit_s"].get<double>());
}

}  // namespace

void register_cluster(CLI::App& app) {
  auto* cluster = app.add_subcommand("cluster", "Form a cluster from the machines on the local networks, with no hostfile");
  cluster->require_subcommand(1);
  cluster->footer(
      "\nOn every machine (the same secret and model file on each):\n"
      "  head -c 24 /dev/urandom | base64 > cluster.secret    # once; copy it to each machine\n"
      "  orchard cluster up --secret-file cluster.secret -m model.gguf\n"
      "Then on any of them:\n"
      "  orchard cluster status\n"
      "  curl http://127.0.0.1:8080/v1/chat/completions ...   # on the leader, once it serves\n"
      "Members find each other by signed UDP multicast (group 239.255.77.17, port 52180) on every\n"
      "interface, measure every link they were heard on, and the leader plans the split over the\n"
      "fastest path of each pair. docs/mac-cluster.md has the cabling; orchard doctor checks it.");

  struct UpOpts {
    serve::ClusterAgentOptions agent;
    std::string secret, secret_file;
    int control_port = 52181, probe_port = 52182, discovery_port = 52180;
    int probe_mib = 4;
    int rank_port = 52183;
    bool no_serve = false;
    std::string api_key_file;
  };
  auto u = std::make_shared<UpOpts>();
  auto* up = cluster->add_subcommand("up", "Announce this machine, find the others, measure links, plan (until stopped)");
  up->add_option("-m,--model", u->agent.model_path, "GGUF model to plan for (every member needs the same file)");
  up->add_option("--secret", u->secret, "Cluster secret (prefer --secret-file or ORCHARD_SECRET: a command line is visible to others)");
  up->add_option("--secret-file", u->secret_file, "File whose first line is the cluster secret");
  up->add_option("--name", u->agent.name, "Name shown to the other members (default: the host name)");
  up->add_option("--port", u->control_port, "Status port (0: any free one; members learn it from announcements)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  up->add_option("--probe-port", u->probe_port, "Port answering the other members' link probes (0: any free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  up->add_option("--discovery-port", u->discovery_port, "UDP port of the announcements (the same on every member)")
      ->capture_default_str()->check(CLI::Range(1, 65535));
  up->add_option("--group", u->agent.beacon.group, "Multicast group of the announcements")->capture_default_str();
  up->add_option("--interface", u->agent.beacon.interfaces, "Announce only on these interfaces (default: every one that is up)");
  up->add_flag("--loopback", u->agent.beacon.loopback, "Announce on loopback too (several members on one machine)");
  up->add_option("--peer", u->agent.beacon.unicast_peers,
                 "Also announce to this address directly (networks that drop multicast); HOST or HOST:PORT");
  up->add_option("--bind", u->agent.bind, "Address the status and probe ports listen on")->capture_default_str();
  up->add_option("--interval-ms", u->agent.interval_ms, "Milliseconds between announcements")
      ->capture_default_str()->check(CLI::Range(50, 60000));
  up->add_option("--timeout-ms", u->agent.timeout_ms, "A member not heard from this long has left")
      ->capture_default_str()->check(CLI::Range(200, 600000));
  up->add_option("--settle-ms", u->agent.settle_ms, "A new plan must hold this long before the leader starts it")
      ->capture_default_str()->check(CLI::Range(0, 600000));
  up->add_option("--probe-mib", u->probe_mib, "MiB sent to measure each link's bandwidth")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  up->add_option("--parallel", u->agent.parallel,
                 "auto (the planner's choice), or pipeline, tensor, hybrid, expert over every member")
      ->capture_default_str();
  up->add_option("--backend", u->agent.backend,
                 "Ranks talk over tcp, rdma, or auto (rdma when every machine of the split has an RDMA device)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "tcp", "rdma"}));
  up->add_flag("--no-serve", u->no_serve, "Only find, measure and plan; start nothing");
  up->add_option("--api-host", u->agent.rank.api_host, "Where the leader serves the API (as orchard serve --host)")
      ->capture_default_str();
  up->add_option("--api-port", u->agent.rank.api_port, "The API's port on the leader")->capture_default_str()
      ->check(CLI::Range(1, 65535));
  up->add_option("--api-key-file", u->api_key_file, "File whose first line is the key the API requires (Bearer)");
  up->add_flag("--insecure", u->agent.rank.insecure,
               "Allow an --api-host beyond loopback without a key (anyone reaching it may use the cluster)");
  up->add_option("--rank-port", u->rank_port, "Port rank 0 listens on for the other ranks")->capture_default_str()
      ->check(CLI::Range(1, 65535));
  up->add_option("-t,--threads", u->agent.rank.threads, "Threads per rank (0: all cores)")->capture_default_str();
  up->add_option("-c,--ctx", u->agent.rank.ctx, "Positions per slot (as orchard serve --ctx)");
  up->add_option("--slots", u->agent.rank.slots, "Requests generated at once (as orchard serve --slots)");
  // For tests of version refusal: announce another version than this build's.
  up->add_option("--announce-version", u->agent.version)->group("");
  up->callback([u] {
    u->agent.secret = u->secret.empty() ? read_secret(u->secret_file, "cluster") : u->secret;
    u->agent.control_port = static_cast<uint16_t>(u->control_port);
    u->agent.probe_port = static_cast<uint16_t>(u->probe_port);
    u->agent.beacon.port = static_cast<uint16_t>(u->discovery_port);
    u->agent.probe_bytes = static_cast<uint64_t>(u->probe_mib) << 20;
    u->agent.serve = !u->no_serve && !u->agent.model_path.empty();
    u->agent.rank_port = static_cast<uint16_t>(u->rank_port);
    u->agent.rank.executable = self_executable();
    u->agent.rank.model_path = u->agent.model_path;
    u->agent.rank.secret = u->agent.secret;
    if (u->agent.parallel != "auto") parallel::parse_kind(u->agent.parallel);  // names a bad one now
    if (!u->api_key_file.empty()) u->agent.rank.api_key = read_first_line(u->api_key_file, "API key file", "cluster");
    // Refused now rather than by every rank 0 the leader would start.
    if (u->agent.serve && !serve::is_loopback_host(u->agent.rank.api_host) && u->agent.rank.api_key.empty() &&
        !u->agent.rank.insecure)
      throw Error("cluster: --api-host " + u->agent.rank.api_host +
                  " serves beyond this machine: give --api-key-file FILE (or --insecure to let anyone use it)");
    if (u->agent.timeout_ms < 2 * u->agent.interval_ms)
      throw Error("cluster: --timeout-ms must be at least twice --interval-ms (a member misses an announcement now and then)");
    std::signal(SIGINT, stop_cluster);
    std::signal(SIGTERM, stop_cluster);
    std::signal(SIGPIPE, SIG_IGN);
    serve::ClusterAgent agent(u->agent);
    agent.start();
    while (!g_cluster_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    agent.stop();
    std::fprintf(stderr, "cluster: stopped (the others forget this machine now)\n");
  });

  struct StatusOpts {
    std::string host = "127.0.0.1";
    int port = 52181;
    bool json = false;
  };
  auto s = std::make_shared<StatusOpts>();
  auto* status = cluster->add_subcommand("status", "Members, their links, the leader and its plan, as this machine's agent knows them");
  status->add_option("--host", s->host, "Where the agent runs")->capture_default_str();
  status->add_option("--port", s->port, "The agent's status port")->capture_default_str()->check(CLI::Range(1, 65535));
  status->add_flag("--json", s->json, "Print the agent's JSON as it is");
  status->callback([s] {
    httplib::Client c(s->host, s->port);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    const auto r = c.Get("/cluster");
    if (!r)
      throw Error("cluster status: no agent answers on " + s->host + ":" + std::to_string(s->port) +
                  " (start one with `orchard cluster up`)");
    if (r->status != 200) throw Error("cluster status: the agent answered HTTP " + std::to_string(r->status));
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded()) throw Error("cluster status: the agent's answer is not JSON");
    if (s->json) std::printf("%s\n", j.dump(2).c_str());
    else print_status(j);
  });
}

}  // namespace orchard::cli
