#include "serve/cluster_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "dist/net/auth.h"
#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

template <class T>
T field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw Error(std::string("job order: missing \"") + key + "\"");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(std::string("job order: \"") + key + "\" has the wrong type");
  }
}

}  // namespace

nlohmann::json JobOrder::to_json() const {
  nlohmann::json r = nlohmann::json::object();
  for (const auto& [rank, address] : routes) r[std::to_string(rank)] = address;
  return {{"job", job},   {"leader", leader}, {"rank", rank}, {"size", size},
          {"coordinator", coordinator}, {"host", host}, {"routes", r}, {"kind", kind}, {"backend", backend},
          {"tp", tp},     {"model_bytes", model_bytes}, {"issued_ms", issued_ms}};
}

JobOrder JobOrder::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("job order: not a JSON object");
  JobOrder o;
  o.job = field<std::string>(j, "job");
  o.leader = field<std::string>(j, "leader");
  o.rank = field<int>(j, "rank");
  o.size = field<int>(j, "size");
  o.coordinator = field<std::string>(j, "coordinator");
  o.host = field<std::string>(j, "host");
  o.kind = field<std::string>(j, "kind");
  o.backend = field<std::string>(j, "backend");
  if (o.backend != "tcp" && o.backend != "rdma") throw Error("job order: backend '" + o.backend + "' is not tcp or rdma");
  o.tp = field<int>(j, "tp");
  o.model_bytes = field<uint64_t>(j, "model_bytes");
  o.issued_ms = field<int64_t>(j, "issued_ms");
  if (o.job.empty() || o.size < 1 || o.size > 4096 || o.rank < 0 || o.rank >= o.size)
    throw Error("job order: rank " + std::to_string(o.rank) + " of " + std::to_string(o.size) + " is not a rank");
  const auto routes = field<nlohmann::json>(j, "routes");
  if (!routes.is_object()) throw Error("job order: \"routes\" must be an object");
  for (const auto& [rank, address] : routes.items()) {
    if (!address.is_string()) throw Error("job order: route " + rank + " is not an address");
    try {
      o.routes[std::stoi(rank)] = address.get<std::string>();
    } catch (const std::logic_error&) {
      throw Error("job order: route '" + rank + "' is not a rank");
    }
  }
  return o;
}

std::string job_backend(const std::string& option, const std::vector<std::vector<std::string>>& devices) {
  if (option != "auto" && option != "tcp" && option != "rdma")
    throw Error("--backend must be auto, tcp or rdma, not '" + option + "'");
  const bool everywhere = !devices.empty() && std::all_of(devices.begin(), devices.end(),
                                                          [](const std::vector<std::string>& d) { return !d.empty(); });
  if (option == "rdma" && !everywhere) throw Error("--backend rdma, but a machine of the job has no RDMA device");
  if (option == "auto") return everywhere ? "rdma" : "tcp";
  return option;
}

std::string sign_order(const std::string& body, const std::string& secret) { return dist::net::hmac_hex(secret, body); }

bool order_signed(const std::string& body, const std::string& signature, const std::string& secret) {
  return dist::net::hex_macs_equal(dist::net::hmac_hex(secret, body), signature);
}

void RankProcess::start(const RankCommand& c, const JobOrder& order) {
  stop();
  std::vector<std::string> argv = {c.executable, "serve", "-m", c.model_path, "--host", c.api_host,
                                   "--port", std::to_string(c.api_port)};
  if (c.threads > 0) argv.insert(argv.end(), {"-t", std::to_string(c.threads)});
  if (c.slots > 0) argv.insert(argv.end(), {"--slots", std::to_string(c.slots)});
  if (c.ctx > 0) argv.insert(argv.end(), {"--ctx", std::to_string(c.ctx)});
  std::vector<std::string> env;
  if (order.rank == 0 && !c.agent.empty()) env.push_back("ORCHARD_CLUSTER_AGENT=" + c.agent);
  if (order.rank == 0 && !c.api_key.empty()) env.push_back("ORCHARD_API_KEY=" + c.api_key);
  if (c.insecure) argv.push_back("--insecure");
  if (order.size > 1) {
    argv.insert(argv.end(), {"--parallel", order.kind});
    if (order.tp > 0) argv.insert(argv.end(), {"--tp", std::to_string(order.tp)});
    std::string routes;
    for (const auto& [rank, address] : order.routes) routes += (routes.empty() ? "" : ",") + std::to_string(rank) + "=" + address;
    env.insert(env.end(), {"ORCHARD_RANK=" + std::to_string(order.rank), "ORCHARD_SIZE=" + std::to_string(order.size),
           "ORCHARD_COORD=" + order.coordinator, "ORCHARD_HOST=" + order.host, "ORCHARD_JOB=" + order.job,
           "ORCHARD_BACKEND=" + order.backend, "ORCHARD_ROUTES=" + routes, "ORCHARD_SECRET=" + c.secret,
           "ORCHARD_TIMEOUT_S=5", "ORCHARD_CONNECT_TIMEOUT_S=30"});
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start a rank: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    platform::end_with_parent();
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    if (order.size == 1)
      for (const char* name : {"ORCHARD_RANK", "ORCHARD_SIZE"}) ::unsetenv(name);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cluster: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  pid_ = pid;
  job_ = order.job;
  exit_text_.clear();
}

bool RankProcess::running() {
  if (pid_ < 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  exit_text_ = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                 : "killed by signal " + std::to_string(WTERMSIG(status));
  pid_ = -1;
  return false;
}

void RankProcess::stop(double grace_s) {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_text_ = "killed after " + std::to_string(grace_s) + " s";
    pid_ = -1;
  }
}

}  // namespace orchard::serve
