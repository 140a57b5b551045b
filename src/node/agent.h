#pragma once
// The node agent (`orchard node`): lends this machine to a coordinator. It registers (its
// machine, the models it serves, its lending policy), heartbeats from a thread, long-polls for
// work, runs each job with its model (the local engine, or a cabled group's ranks) — resuming
// after the output an earlier attempt streamed — streams the output back chunk by chunk and
// completes the job, which pays its owner.
//
// It connects outbound only, so it works behind NAT. When its policy does not allow lending
// (--when-idle and the machine is busy, its user is at it, or outside the window) it heartbeats
// as draining and takes no work. When the user comes back (--idle-after) during a job, the job
// is handed back at once, without penalty. drain() (SIGTERM, SIGINT) gives a running job back
// and returns from run().
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/node_identity.h"
#include "protocol/node_info.h"
#include "node/activity.h"
#include "node/coordinator_client.h"
#include "node/job_runner.h"
#include "node/machine.h"

namespace orchard::node {

struct AgentOptions {
  std::string coordinator;  // http://host:port or https://host:port
  std::string ca_cert;      // https: the coordinator's certificate or CA (PEM); empty: the system's
  std::string owner;        // the account credited for this node's work
  protocol::HardwareClass hardware = protocol::HardwareClass::Laptop;
  std::optional<protocol::Region> region;  // where the owner says the node is (the world map)
  LendingPolicy lending;
  std::string chip = "cpu";    // a catalog id brings the planner's figures for that chip
  double bandwidth_gbs = 0;    // 0: measured at start
  uint64_t memory_bytes = 0;   // what the node reports (--memory); 0: the machine's MemTotal
  // A cabled group (`orchard node --parallel` on rank 0 of a job): every rank's machine and the
  // link the ranks measured (node/group.h). Empty: this machine alone.
  std::vector<protocol::MachineInfo> machines;
  std::optional<protocol::CabledGroup> group;
  int poll_wait_s = 20;        // long-poll length
  bool log = true;             // a line per job on stderr
  // Tests: called on the work thread after each output chunk is queued for sending.
  std::function<void(const std::string& job_id, int64_t index)> on_chunk;
  // With lending.idle_after_ms: where the user's input is read (null: SystemActivity), and how
  // often (a returning user gets their machine back within about this long).
  std::shared_ptr<ActivitySource> activity;
  int64_t activity_check_ms = 1000;
  // Tests of the coordinator's checks (issue 26), never set by a user: "inflate-tokens" reports
  // ten times the tokens it used, plus a thousand, when it completes a job; "skimp-memory"
  // computes a sixteenth of the coordinator's memory check and sends zeros for the rest.
  std::string cheat;
};

class Agent {
 public:
  Agent(AgentOptions options, protocol::NodeIdentity identity, std::vector<ServedModel> models);
  ~Agent();

  // Registers and works until drain() or kill(). Throws orchard::Error when the coordinator
  // refuses the registration (a coordinator that does not answer is retried), or when a group's
  // ranks lost each other mid-job (the job is handed back first).
  void run();
  // Stops taking work, gives a running job back (what it streamed stays for the next node)
  // and makes run() return. Only sets a flag: safe from a signal handler.
  void drain() { draining_.store(true); }
  // Tests: stops dead, telling the coordinator nothing, as if the process were killed.
  void kill() { killed_.store(true); }

  const std::string& id() const { return identity_.id(); }
  protocol::NodeInfo describe() const;
  int64_t jobs_completed() const { return completed_.load(); }

 private:
  class Sender;
  bool stopping() const { return draining_.load() || killed_.load(); }
  void register_until_accepted();
  // Answers the memory check the last registration brought, if any (before taking work: the
  // coordinator gives none until then). Sets fatal_ and returns false when the node must stop.
  bool answer_memory_check();
  void heartbeat_loop();
  // Samples the user's activity (lending.idle_after_ms only); logs when the user comes and goes.
  void check_activity();
  void activity_loop();
  protocol::HeartbeatState heartbeat_state();
  // Empty when the policy allows lending now.
  std::string lending_refusal() const;
  void run_job(const protocol::Work& w);
  // An audit job (protocol/audit.h): scores another node's tokens and reports them as one chunk.
  void run_audit_job(const protocol::Work& w, ServedModel& model);
  // Completes the attempt, retrying what is transient; logs the outcome under `name`.
  void complete_job(const protocol::Work& w, const std::string& name, int64_t prompt_tokens, int64_t generated_tokens,
                    const std::string& finish_reason, int64_t shown_tokens);
  void log(const std::string& line) const;

  AgentOptions opts_;
  protocol::NodeIdentity identity_;
  std::vector<ServedModel> models_;
  CoordinatorClient client_;
  protocol::NodeInfo info_;
  int64_t heartbeat_interval_ms_ = 1000;
  std::optional<protocol::MemoryChallenge> memory_check_;  // from the last registration, until answered

  std::atomic<bool> draining_{false}, killed_{false}, done_{false};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> user_idle_ms_{-1};  // the last sample; -1: unknown
  std::atomic<bool> user_active_{false};   // the user's activity alone refuses lending now
  std::string fatal_;  // why run() ends with an error (set on the work thread)
  std::mutex running_mu_;
  std::string running_job_;  // the job being run now, for heartbeats
  std::thread heartbeats_, activity_watch_;
};

}  // namespace orchard::node
