#pragma once
// The split `orchard cluster up`'s leader runs over the members: an order per rank, signed with
// the cluster secret (a member obeys no one else), and the `orchard serve` process each member
// starts for its rank — rank 0 on the leader serves the API, the others follow it.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orchard::serve {

struct JobOrder {
  std::string job;     // fresh per start: ranks of an older job are refused by the mesh
  std::string leader;  // the leader's member id
  int rank = 0, size = 1;
  std::string coordinator;  // host:port where rank 0 listens, as this rank reaches it
  std::string host;         // this rank's own address (names it in errors)
  std::map<int, std::string> routes;  // where this rank reaches each other rank
  std::string kind;                   // pipeline, tensor, hybrid or expert ("" for one machine)
  std::string backend = "tcp";        // tcp, or rdma when every machine of the job has a device
  int tp = 0;
  uint64_t model_bytes = 0;  // the file the leader planned for; a member with another refuses
  int64_t issued_ms = 0;     // orders older than a minute are refused (replays)

  nlohmann::json to_json() const;
  // Throws orchard::Error naming the field.
  static JobOrder from_json(const nlohmann::json& j);
};

// The backend a job runs over: `option` "tcp" or "rdma" as given, or "auto": rdma when every
// machine of the job announced an RDMA device (RDMA over Thunderbolt 5, InfiniBand, RoCE), else
// tcp. Throws orchard::Error for an unknown option or rdma asked of a machine without a device.
std::string job_backend(const std::string& option, const std::vector<std::vector<std::string>>& devices);

// HMAC-SHA256 of `body` with the secret, in hex: the X-Orchard-Signature of an order.
std::string sign_order(const std::string& body, const std::string& secret);
bool order_signed(const std::string& body, const std::string& signature, const std::string& secret);

// How each rank's `orchard serve` runs.
struct RankCommand {
  std::string executable;  // this orchard binary
  std::string model_path;
  std::string api_host = "127.0.0.1";
  int api_port = 8080;
  int threads = 0, slots = 0;
  int64_t ctx = 0;
  std::string secret;
  std::string agent;  // "127.0.0.1:port" of the agent, for rank 0's page
  std::string api_key;  // rank 0 requires it (ORCHARD_API_KEY, off the command line)
  bool insecure = false;  // rank 0 may serve beyond loopback without a key
};

// One rank's process. Stopping sends SIGTERM, then SIGKILL after `grace_s`.
class RankProcess {
 public:
  RankProcess() = default;
  ~RankProcess() { stop(); }
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  // Starts `orchard serve` for `order` (a whole model when order.size is 1). Throws orchard::Error.
  void start(const RankCommand& command, const JobOrder& order);
  void stop(double grace_s = 5);
  // True while the process runs; reaps it once it ended (exit_text says how).
  bool running();
  const std::string& exit_text() const { return exit_text_; }
  const std::string& job() const { return job_; }

 private:
  pid_t pid_ = -1;
  std::string job_, exit_text_;
};

}  // namespace orchard::serve
