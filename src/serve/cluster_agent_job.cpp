// The part of `orchard cluster up` that runs the plan: the leader starts the split once the plan
// has held for a moment, replaces it when the members or the plan change (a member that died:
// at once; a better plan: when the running one is idle), and every member obeys the leader's
// signed orders by starting or stopping its rank's `orchard serve`.
#include <httplib.h>

#include <algorithm>
#include <cstdio>

#include "dist/net/auth.h"
#include "parallel/plan.h"
#include "platform/wall_clock.h"
#include "serve/cluster_agent.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

// The value of a Prometheus line "name N" in `text`, or -1.
double metric(const std::string& text, const std::string& name) {
  size_t at = 0;
  while ((at = text.find(name + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::atof(text.c_str() + at + name.size() + 1);
    at += name.size();
  }
  return -1;
}

// Orders older than this are refused as replays (machines' clocks agree far better: NTP).
constexpr int64_t kOrderMaxAgeMs = 5 * 60 * 1000;

}  // namespace

bool ClusterAgent::serving_idle() const {
  // Where rank 0 listens: its own address, or loopback when it listens on every interface.
  const std::string host = o_.rank.api_host == "0.0.0.0" ? "127.0.0.1" : o_.rank.api_host;
  httplib::Client c(host, o_.rank.api_port);
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(2, 0);
  httplib::Headers headers;
  if (!o_.rank.api_key.empty()) headers.emplace("Authorization", "Bearer " + o_.rank.api_key);
  const auto r = c.Get("/metrics", headers);
  if (!r) return true;  // nothing served: nothing to interrupt
  if (r->status != 200) return false;  // an answer it cannot read: assume requests are in flight
  return metric(r->body, "orchard_slots_active") == 0 && metric(r->body, "orchard_queue_depth") == 0;
}

void ClusterAgent::lead() {
  if (!o_.serve) return;
  std::lock_guard job_lock(job_mu_);
  std::optional<parallel::DiscoveredPlan> plan;
  bool leading, members_gone = false;
  int64_t since;
  {
    std::lock_guard lock(mu_);
    leading = leader_ == id_;
    plan = plan_chosen_;
    since = plan_since_ms_;
    if (job_)
      for (const std::string& m : job_->machines)
        if (m != id_ && !members_.members().count(m)) members_gone = true;
  }
  if (!leading) {
    if (job_) stop_job("this machine no longer leads");
    return;
  }
  const int64_t now = platform::unix_time_ms();
  const bool rank0_died = job_ && !rank_.running();
  if (job_ && (members_gone || rank0_died)) {
    stop_job(members_gone ? "a member of the running split left" : "rank 0 " + rank_.exit_text());
  }
  if (!plan || now - since < o_.settle_ms || now < retry_after_ms_) return;
  const bool same = job_ && job_->machines == plan->machines && job_->split == plan->prediction.candidate.label();
  if (same) return;
  // A better plan (a member joined): let the requests in flight finish first.
  if (job_) {
    if (!serving_idle()) {
      job_state_ = "waiting for requests in flight before re-planning";
      return;
    }
    stop_job("re-planning: " + plan->why);
  }
  try {
    start_job();
  } catch (const std::exception& e) {
    say(std::string("cannot start the split: ") + e.what() + " (trying again in 5 s)");
    retry_after_ms_ = platform::unix_time_ms() + 5000;
    stop_job("its start failed");
  }
}

void ClusterAgent::start_job() {
  parallel::DiscoveredPlan plan;
  std::vector<parallel::MeasuredPath> paths;
  std::map<std::string, std::string> controls;  // member id -> "host:port" of its agent
  std::vector<std::vector<std::string>> devices;
  {
    std::lock_guard lock(mu_);
    plan = *plan_chosen_;
    paths = paths_;
    for (const auto& [id, m] : members_.members())
      if (!m.paths.empty()) controls[id] = m.paths.front().address + ":" + std::to_string(m.announcement.control_port);
    for (const std::string& id : plan.machines) {
      const auto it = members_.members().find(id);
      devices.push_back(id == id_ ? rdma_devices_ : it != members_.members().end() ? it->second.announcement.rdma
                                                                                  : std::vector<std::string>{});
    }
  }
  const size_t n = plan.machines.size();
  // route(i, j): where rank i reaches rank j, over the chosen path of their pair.
  auto route = [&](size_t i, size_t j) -> std::string {
    const std::string &a = plan.machines[i], &b = plan.machines[j];
    for (const auto& p : paths)
      if ((p.from == a && p.to == b) || (p.from == b && p.to == a)) {
        const std::string& address = p.address_of_other(a);
        if (address.empty()) break;
        return address;
      }
    throw Error("no measured path between members " + a + " and " + b);
  };
  Job job;
  job.id = "cluster-" + dist::net::random_hex(6);
  job.split = plan.prediction.candidate.label();
  job.machines = plan.machines;
  job.backend = n > 1 ? job_backend(o_.backend, devices) : "";
  job.member_controls.assign(n, "");
  const int64_t issued = platform::unix_time_ms();
  std::vector<JobOrder> orders(n);
  for (size_t r = 0; r < n; ++r) {
    JobOrder& o = orders[r];
    o.job = job.id;
    o.leader = id_;
    o.rank = static_cast<int>(r);
    o.size = static_cast<int>(n);
    o.kind = n > 1 ? parallel::kind_name(plan.prediction.candidate.kind) : "";
    o.tp = plan.prediction.candidate.kind == parallel::Kind::kHybrid || plan.prediction.candidate.kind == parallel::Kind::kExpert
               ? plan.prediction.candidate.tp
               : 0;
    o.model_bytes = model_bytes_;
    o.issued_ms = issued;
    if (n > 1) o.backend = job.backend;
    if (n > 1) {
      o.coordinator = (r == 0 ? route(1, 0) : route(r, 0)) + ":" + std::to_string(o_.rank_port);
      o.host = r == 0 ? route(1, 0) : route(0, r);
      for (size_t j = 0; j < n; ++j)
        if (j != r) o.routes[static_cast<int>(j)] = route(r, j);
    }
  }
  job_state_ = "starting";
  say("starting " + job.split + " over " + std::to_string(n) + " machine(s) as job " + job.id +
      (n > 1 ? " (" + job.backend + ")" : ""));
  // The members' ranks first (they wait for rank 0), then this machine's rank 0.
  for (size_t r = 1; r < n; ++r) {
    const auto it = controls.find(plan.machines[r]);
    if (it == controls.end()) throw Error("member " + plan.machines[r] + " is gone");
    job.member_controls[r] = it->second;
    const std::string body = orders[r].to_json().dump();
    httplib::Client c("http://" + it->second);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    const auto res = c.Post("/cluster/job", {{"X-Orchard-Signature", sign_order(body, o_.secret)}}, body,
                            "application/json");
    if (!res || res->status != 200) {
      job_ = job;  // so stop_job tells the ones already started
      throw Error("member " + plan.machines[r] + " (" + it->second + ") did not take rank " + std::to_string(r) + ": " +
                  (res ? res->body : httplib::to_string(res.error())));
    }
  }
  RankCommand command = o_.rank;
  command.agent = (o_.bind == "0.0.0.0" ? std::string("127.0.0.1") : o_.bind) + ":" + std::to_string(control_port_);
  rank_.start(command, orders[0]);
  job_ = job;
  job_state_ = "running";
  say("serving " + job.split + " on http://" + o_.rank.api_host + ":" + std::to_string(o_.rank.api_port) +
      " (job " + job.id + ")");
}

void ClusterAgent::stop_job(const std::string& why) {
  if (job_) {
    say("stopping job " + job_->id + ": " + why);
    const std::string body = nlohmann::json{{"job", job_->id}, {"issued_ms", platform::unix_time_ms()}}.dump();
    for (const std::string& where : job_->member_controls) {
      if (where.empty()) continue;
      httplib::Client c("http://" + where);
      c.set_connection_timeout(1, 0);
      c.set_read_timeout(10, 0);
      c.Post("/cluster/stop", {{"X-Orchard-Signature", sign_order(body, o_.secret)}}, body, "application/json");
    }
  }
  rank_.stop();
  job_.reset();
  job_state_ = "none";
}

int ClusterAgent::order(const std::string& path, const std::string& body, const std::string& signature,
                        std::string& answer) {
  auto refuse = [&](int status, const std::string& why) {
    answer = nlohmann::json{{"error", why}}.dump();
    say("refused an order (" + path + "): " + why);
    return status;
  };
  if (!order_signed(body, signature, o_.secret)) return refuse(401, "not signed with this cluster's secret");
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("issued_ms") || !j["issued_ms"].is_number_integer())
    return refuse(400, "not an order");
  if (std::llabs(platform::unix_time_ms() - j["issued_ms"].get<int64_t>()) > kOrderMaxAgeMs)
    return refuse(400, "issued too long ago (a replay, or this machine's clock is off)");
  std::lock_guard job_lock(job_mu_);
  if (path == "/cluster/stop") {
    if (!j.contains("job") || !j["job"].is_string()) return refuse(400, "no job named");
    if (rank_.job() == j["job"].get<std::string>()) {
      say("stopping rank of job " + rank_.job() + " (the leader's order)");
      rank_.stop();
      job_state_ = "none";
    }
    answer = "{}";
    return 200;
  }
  JobOrder o;
  try {
    o = JobOrder::from_json(j);
  } catch (const std::exception& e) {
    return refuse(400, e.what());
  }
  if (std::find(seen_jobs_.begin(), seen_jobs_.end(), o.job + "/" + std::to_string(o.rank)) != seen_jobs_.end())
    return refuse(409, "job " + o.job + " was started here already");
  {
    std::lock_guard lock(mu_);
    if (o.leader != leader_) return refuse(409, "this machine follows " + leader_ + ", not " + o.leader);
  }
  if (o.model_bytes != model_bytes_)
    return refuse(409, "the leader's model has " + std::to_string(o.model_bytes) + " bytes, this machine's " +
                           std::to_string(model_bytes_) + " (give every member the same file)");
  seen_jobs_.push_back(o.job + "/" + std::to_string(o.rank));
  if (seen_jobs_.size() > 1024) seen_jobs_.erase(seen_jobs_.begin());
  try {
    rank_.start(o_.rank, o);
  } catch (const std::exception& e) {
    return refuse(500, e.what());
  }
  job_state_ = "rank " + std::to_string(o.rank) + " of job " + o.job;
  say("running rank " + std::to_string(o.rank) + " of " + std::to_string(o.size) + " (" + o.kind + ", job " + o.job +
      ") for the leader");
  answer = "{}";
  return 200;
}

}  // namespace orchard::serve
