#pragma once
// What `orchard cluster up` runs on each machine: announces this machine on every local network
// and hears the others (dist/discovery), measures the links to each member on every address it
// was heard on (dist/link_probe), and, on the leader — the member with the most memory, ties to
// the one up longest, then the smallest id, so every member agrees without a vote — asks the planner for the best split
// over the members and the fastest path of each pair (parallel/discovered_cluster). Its HTTP
// port answers GET /cluster (members, links, leader, plan: `orchard cluster status`) and GET
// /cluster/links (this machine's measurements, which the leader collects).
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/discovery/beacon.h"
#include "dist/discovery/membership.h"
#include "parallel/discovered_cluster.h"
#include "serve/cluster_job.h"

namespace orchard::serve {

struct ClusterAgentOptions {
  std::string secret;      // signs announcements; required
  std::string model_path;  // the model to plan for ("": members are found and measured only)
  std::string name;        // shown to people; default the host name
  std::string version;     // announced; default this build's (tests claim others)
  std::string bind = "0.0.0.0";
  uint16_t control_port = 52181;  // 0: any free port (announced)
  uint16_t probe_port = 52182;
  dist::discovery::BeaconOptions beacon;
  int interval_ms = 500;   // between announcements
  int timeout_ms = 3000;   // a member not heard from this long is gone
  uint64_t probe_bytes = 4ull << 20;
  int remeasure_s = 60;
  // Running the plan: "auto" (the planner's choice) or a kind forced over every member; `serve`
  // false only plans. Ranks talk on rank_port; rank 0 on the leader serves the API.
  std::string parallel = "auto";
  std::string backend = "auto";  // auto: rdma when every machine of the job has a device, else tcp
  bool serve = true;
  uint16_t rank_port = 52183;
  RankCommand rank;
  int settle_ms = 2000;  // a plan must hold this long before it is started
  std::function<void(const std::string&)> log;  // default: "cluster: …" on stderr
};

class ClusterAgent {
 public:
  explicit ClusterAgent(ClusterAgentOptions options);
  ~ClusterAgent();
  ClusterAgent(const ClusterAgent&) = delete;
  ClusterAgent& operator=(const ClusterAgent&) = delete;

  // Binds the ports and starts the threads; throws orchard::Error naming what failed.
  void start();
  // Says goodbye (members forget this one at once) and stops the threads.
  void stop();

  const std::string& id() const { return id_; }
  uint16_t control_port() const { return control_port_; }
  nlohmann::json status() const;
  nlohmann::json links_json() const;

 private:
  struct Measured {
    std::string member, address, local;
    double rtt_us = 0, mbit_s = 0;
    int64_t at_ms = 0;
    std::string error;
    bool of(const std::string& m, const std::string& a, const std::string& l) const {
      return member == m && address == a && local == l;
    }
  };
  void listen_loop();
  void announce_loop();
  void measure_loop();
  void plan_once();
  // The split (cluster_agent_job.cpp): the leader starts, replaces and stops jobs; every member
  // obeys signed orders.
  void lead();
  void start_job();
  void stop_job(const std::string& why);
  bool serving_idle() const;
  int order(const std::string& path, const std::string& body, const std::string& signature, std::string& answer);
  dist::discovery::Announcement announcement(bool leaving);
  std::string leader_locked() const;
  void say(const std::string& line) const;

  ClusterAgentOptions o_;
  std::string id_;
  uint16_t control_port_ = 0, probe_port_ = 0;
  uint64_t started_ms_ = 0;
  std::vector<std::string> rdma_devices_;
  std::string machine_json_;  // this machine's `orchard plan --calibrate` file ("" when none)
  std::optional<parallel::MachineSpec> machine_;
  // Members' calibrations, fetched once per member (the leader's planning).
  std::map<std::string, std::optional<parallel::MachineSpec>> calibrations_;
  std::unique_ptr<dist::discovery::Beacon> beacon_;
  uint64_t model_bytes_ = 0;
  std::unique_ptr<parallel::ModelCost> model_;

  mutable std::mutex mu_;
  dist::discovery::Membership members_;
  std::vector<Measured> measured_;
  uint64_t strangers_ = 0;
  std::vector<std::string> stranger_sources_;
  std::string leader_;
  nlohmann::json plan_ = nullptr;
  std::string plan_inputs_;  // what the plan was made from: made again when it changes
  std::optional<parallel::DiscoveredPlan> plan_chosen_;
  std::vector<parallel::MeasuredPath> paths_;  // the chosen path of each pair
  int64_t plan_since_ms_ = 0;
  uint64_t seq_ = 0;

  // The job (its own lock: forks and HTTP calls happen under it, never under mu_).
  mutable std::mutex job_mu_;
  RankProcess rank_;
  struct Job {
    std::string id, split, backend;
    std::vector<std::string> machines;           // ids in rank order
    std::vector<std::string> member_controls;    // host:port of each rank's agent (rank 0: "")
  };
  std::optional<Job> job_;                     // the leader's running job
  std::string job_state_ = "none";             // for status
  int64_t retry_after_ms_ = 0;
  std::vector<std::string> seen_jobs_;         // orders already obeyed (replays refused)

  std::atomic<bool> stop_{false};
  struct Http;
  std::unique_ptr<Http> http_;
  int probe_fd_ = -1;
  std::vector<std::thread> threads_;
};

}  // namespace orchard::serve
