#include "serve/cluster_agent.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "dist/group.h"
#include "dist/link_probe.h"
#include "dist/make_group.h"
#include "dist/net/auth.h"
#include "dist/net/socket.h"
#include "dist/rdma/verbs.h"
#include "model/gguf.h"
#include "parallel/auto_plan.h"
#include "parallel/catalog.h"
#include "parallel/model_cost.h"
#include "platform/platform.h"
#include "platform/version.h"
#include "platform/wall_clock.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

using dist::discovery::Announcement;
using dist::discovery::Member;
using dist::discovery::Observation;

std::string host_name() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

struct ClusterAgent::Http {
  httplib::Server server;
};

ClusterAgent::ClusterAgent(ClusterAgentOptions options)
    : o_(std::move(options)), id_(dist::net::random_hex(8)), members_(id_, o_.version.empty() ? kVersion : o_.version, o_.timeout_ms) {
  if (o_.secret.empty())
    throw Error("cluster: a secret is needed (--secret-file FILE or ORCHARD_SECRET): every member signs its "
                "announcements with it; make one with `head -c 24 /dev/urandom | base64 > cluster.secret` and copy it "
                "to each machine");
  if (o_.version.empty()) o_.version = kVersion;
  if (o_.name.empty()) o_.name = host_name();
  if (!o_.log) o_.log = [](const std::string& line) { std::fprintf(stderr, "cluster: %s\n", line.c_str()); };
  // This machine's calibration, for the leader's planner (`orchard plan --calibrate` wrote it).
  if (const std::string file = parallel::default_node_file(); std::filesystem::exists(file)) {
    try {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      machine_ = parallel::machine_from_json(nlohmann::json::parse(text.str()), file);
      machine_json_ = text.str();
    } catch (const std::exception& e) {
      o_.log(std::string("ignoring the calibration in ") + file + ": " + e.what());
    }
  }
  if (!o_.model_path.empty()) {
    std::error_code ec;
    model_bytes_ = std::filesystem::file_size(o_.model_path, ec);
    if (ec) throw Error("cluster: " + o_.model_path + ": " + ec.message());
    auto file = GGUFFile::open(o_.model_path, GGUFLoad::Map);
    model_ = std::make_unique<parallel::ModelCost>(parallel::ModelCost::from_gguf(*file));
  }
}

ClusterAgent::~ClusterAgent() { stop(); }

void ClusterAgent::say(const std::string& line) const { o_.log(line); }

void ClusterAgent::start() {
  started_ms_ = static_cast<uint64_t>(platform::unix_time_ms());
  // Read once (devices do not come and go); announced only where this build can use them.
  if (dist::rdma_available()) rdma_devices_ = dist::rdma::ib_device_names();
  beacon_ = std::make_unique<dist::discovery::Beacon>(o_.beacon);
  dist::net::Fd probe = dist::net::listen_on({o_.bind, o_.probe_port});
  probe_port_ = dist::net::local_port(probe.get());
  probe_fd_ = probe.release();
  http_ = std::make_unique<Http>();
  http_->server.Get("/cluster", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(status().dump(2) + "\n", "application/json");
  });
  http_->server.Get("/cluster/links", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(links_json().dump() + "\n", "application/json");
  });
  http_->server.Get("/cluster/machine", [this](const httplib::Request&, httplib::Response& res) {
    if (machine_json_.empty()) res.status = 404;
    else res.set_content(machine_json_, "application/json");
  });
  http_->server.set_payload_max_length(64 * 1024);
  for (const char* path : {"/cluster/job", "/cluster/stop"})
    http_->server.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      std::string answer;
      res.status = order(req.path, req.body, req.get_header_value("X-Orchard-Signature"), answer);
      res.set_content(answer, "application/json");
    });
  const int port = o_.control_port == 0 ? http_->server.bind_to_any_port(o_.bind)
                                        : (http_->server.bind_to_port(o_.bind, o_.control_port) ? o_.control_port : -1);
  if (port <= 0)
    throw Error("cluster: cannot listen on " + o_.bind + ":" + std::to_string(o_.control_port) +
                " (another `orchard cluster up` running? give --port)");
  control_port_ = static_cast<uint16_t>(port);
  say("'" + o_.name + "' (" + id_ + ", orchard " + o_.version + ") announcing on " +
      std::to_string(beacon_->interfaces().size()) + " interface(s), status on port " + std::to_string(control_port_));
  threads_.emplace_back([this] { http_->server.listen_after_bind(); });
  threads_.emplace_back([this] { dist::serve_link_probes(probe_fd_, stop_); });
  threads_.emplace_back([this] { listen_loop(); });
  threads_.emplace_back([this] { announce_loop(); });
  threads_.emplace_back([this] { measure_loop(); });
}

void ClusterAgent::stop() {
  if (stop_.exchange(true) || threads_.empty()) return;
  try {
    beacon_->send(dist::discovery::encode_announcement(announcement(true), o_.secret));
  } catch (const std::exception&) {  // leaving quietly: the others time this one out
  }
  http_->server.stop();
  for (std::thread& t : threads_) t.join();
  {
    std::lock_guard job_lock(job_mu_);
    stop_job("this machine is leaving");
  }
  threads_.clear();
  ::close(probe_fd_);
}

Announcement ClusterAgent::announcement(bool leaving) {
  Announcement a;
  a.id = id_;
  a.name = o_.name;
  a.version = o_.version;
  a.control_port = control_port_;
  a.probe_port = probe_port_;
  for (const auto& i : beacon_->interfaces()) a.addresses.push_back(i.address);
  a.memory_bytes = platform::physical_memory_bytes();
  a.available_bytes = platform::available_memory_bytes().value_or(0);
  a.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  a.rdma = rdma_devices_;
  a.model = o_.model_path.empty() ? "" : std::filesystem::path(o_.model_path).filename().string();
  a.model_bytes = model_bytes_;
  a.started_ms = started_ms_;
  a.calibrated = !machine_json_.empty();
  std::lock_guard lock(mu_);
  a.seq = ++seq_;
  a.leaving = leaving;
  return a;
}

void ClusterAgent::listen_loop() {
  std::map<std::string, int64_t> logged_stranger;  // source -> when last logged
  while (!stop_.load()) {
    const auto got = beacon_->receive(std::chrono::milliseconds(200));
    if (!got) continue;
    const auto d = dist::discovery::decode_announcement(got->datagram, o_.secret);
    const int64_t now = platform::unix_time_ms();
    if (!d.announcement) {
      if (!d.stranger) continue;  // other traffic on the port
      std::lock_guard lock(mu_);
      ++strangers_;
      if (std::find(stranger_sources_.begin(), stranger_sources_.end(), got->from) == stranger_sources_.end() &&
          stranger_sources_.size() < 16)
        stranger_sources_.push_back(got->from);
      if (now - logged_stranger[got->from] > 60000) {
        logged_stranger[got->from] = now;
        say("ignored an announcement from " + got->from +
            " not signed with this cluster's secret (another cluster, or a stranger)");
      }
      continue;
    }
    Observation o;
    {
      std::lock_guard lock(mu_);
      o = members_.observe(*d.announcement, got->from, got->local, now);
    }
    if (!o.message.empty()) say(o.message);
  }
}

std::string ClusterAgent::leader_locked() const {
  // The most memory leads (it can hold the most of a model as rank 0); among equals the one up
  // longest, so a machine that comes back does not take over a running cluster; then the id.
  auto key = [](uint64_t memory, uint64_t started, const std::string& id) {
    return std::make_tuple(~memory, started, id);  // smaller is better
  };
  std::string best = id_;
  auto best_key = key(platform::physical_memory_bytes(), started_ms_, id_);
  for (const auto& [id, m] : members_.members()) {
    const auto k = key(m.announcement.memory_bytes, m.announcement.started_ms, id);
    if (k < best_key) best = id, best_key = k;
  }
  return best;
}

void ClusterAgent::announce_loop() {
  auto next_plan = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    try {
      beacon_->send(dist::discovery::encode_announcement(announcement(false), o_.secret));
    } catch (const std::exception& e) {
      say(std::string("cannot announce: ") + e.what());
    }
    std::vector<std::string> gone;
    std::string leader;
    {
      std::lock_guard lock(mu_);
      gone = members_.expire(platform::unix_time_ms());
      leader = leader_locked();
      if (leader != leader_) {
        leader_ = leader;
        const auto it = members_.members().find(leader);
        gone.push_back("leader is " + (leader == id_ ? "this machine ('" + o_.name + "')"
                                                        : "'" + it->second.announcement.name + "' (" + leader + ")"));
      }
    }
    for (const std::string& line : gone) say(line);
    if (std::chrono::steady_clock::now() >= next_plan) {
      plan_once();
      next_plan = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    for (int waited = 0; waited < o_.interval_ms && !stop_.load(); waited += 50)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, o_.interval_ms - waited)));
  }
}

void ClusterAgent::measure_loop() {
  while (!stop_.load()) {
    // The next path heard on and not measured lately.
    std::optional<Measured> next;
    uint16_t port = 0;
    {
      std::lock_guard lock(mu_);
      const int64_t now = platform::unix_time_ms();
      for (const auto& member : members_.members()) {  // (clang 14: no structured binding in a lambda)
        const std::string& id = member.first;
        const Member& m = member.second;
        for (const auto& p : m.paths) {
          const auto done = std::find_if(measured_.begin(), measured_.end(), [&](const Measured& x) {
            return x.of(id, p.address, p.local);
          });
          if (done != measured_.end() && now - done->at_ms < int64_t{o_.remeasure_s} * 1000) continue;
          next = Measured{id, p.address, p.local, 0, 0, 0, {}};
          port = m.announcement.probe_port;
          break;
        }
        if (next) break;
      }
    }
    if (!next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    try {
      const auto m = dist::measure_link({next->address, port}, std::chrono::seconds(10), 20, o_.probe_bytes);
      next->rtt_us = m.rtt_us;
      next->mbit_s = m.mbit_s;
    } catch (const std::exception& e) {
      next->error = e.what();
    }
    next->at_ms = platform::unix_time_ms();
    std::lock_guard lock(mu_);
    std::erase_if(measured_, [&](const Measured& x) {
      return x.of(next->member, next->address, next->local);
    });
    const auto member = members_.members().find(next->member);
    const std::string who = member == members_.members().end() ? next->member : "'" + member->second.announcement.name + "'";
    if (next->error.empty())
      say("link to " + who + " over " + next->address + " (from " + next->local +
          "): " + std::to_string(static_cast<int>(next->rtt_us)) + " µs round trip, " +
          std::to_string(static_cast<int>(next->mbit_s)) + " Mbit/s");
    else
      say("link to " + who + " over " + next->address + " failed: " + next->error);
    measured_.push_back(std::move(*next));
  }
}

nlohmann::json ClusterAgent::links_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = {{"id", id_}, {"links", nlohmann::json::array()}};
  for (const Measured& m : measured_) {
    if (!members_.members().count(m.member)) continue;
    nlohmann::json l = {{"to", m.member}, {"address", m.address}, {"local", m.local}, {"at_ms", m.at_ms}};
    if (m.error.empty()) l["rtt_us"] = m.rtt_us, l["mbit_s"] = m.mbit_s;
    else l["error"] = m.error;
    out["links"].push_back(l);
  }
  return out;
}

void ClusterAgent::plan_once() {
  // Who is in, and where to ask each member for its measurements.
  std::vector<parallel::DiscoveredMachine> machines;
  std::vector<std::pair<std::string, std::string>> ask;  // id, "host:port"
  std::vector<std::string> calibrate;                     // calibrated members
  std::string leader;
  {
    std::lock_guard lock(mu_);
    leader = leader_;
    if (leader != id_) {
      const auto it = members_.members().find(leader);
      if (it == members_.members().end() || it->second.paths.empty()) return;
      ask.emplace_back(leader, it->second.paths.front().address + ":" + std::to_string(it->second.announcement.control_port));
    } else {
      machines.push_back({id_, o_.name, platform::physical_memory_bytes(),
                          static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), machine_});
      std::vector<const Member*> others;
      for (const auto& [id, m] : members_.members())
        // A split needs the same model file on every machine (its name and size, for now).
        if (!m.paths.empty() && m.announcement.model_bytes == model_bytes_) others.push_back(&m);
      std::sort(others.begin(), others.end(), [](const Member* a, const Member* b) {
        return a->announcement.memory_bytes != b->announcement.memory_bytes
                   ? a->announcement.memory_bytes > b->announcement.memory_bytes
                   : a->announcement.id < b->announcement.id;
      });
      for (const Member* m : others) {
        machines.push_back({m->announcement.id, m->announcement.name, m->announcement.memory_bytes, m->announcement.cores,
                            std::nullopt});
        if (m->announcement.calibrated) calibrate.push_back(m->announcement.id);
        ask.emplace_back(m->announcement.id,
                         m->paths.front().address + ":" + std::to_string(m->announcement.control_port));
      }
    }
  }
  auto fetch = [](const std::string& where, const char* path) -> nlohmann::json {
    httplib::Client c("http://" + where);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(2, 0);
    const auto r = c.Get(path);
    if (!r || r->status != 200) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  };
  if (leader != id_) {  // a follower shows the leader's plan
    const nlohmann::json s = fetch(ask.front().second, "/cluster");
    std::lock_guard lock(mu_);
    plan_ = s.is_object() && s.contains("plan") ? s["plan"] : nlohmann::json(nullptr);
    return;
  }
  std::vector<parallel::MeasuredPath> paths;
  auto add = [&](const std::string& from, const nlohmann::json& links) {
    if (!links.is_object() || !links.contains("links") || !links["links"].is_array()) return;
    for (const auto& l : links["links"])
      if (l.is_object() && l.contains("rtt_us") && l.contains("to") && l["to"].is_string() && l.contains("address") &&
          l["address"].is_string() && l["rtt_us"].is_number() && l.contains("mbit_s") && l["mbit_s"].is_number())
        paths.push_back({from, l["to"].get<std::string>(), l["address"].get<std::string>(), l["rtt_us"].get<double>(),
                         l["mbit_s"].get<double>(),
                         l.contains("local") && l["local"].is_string() ? l["local"].get<std::string>() : ""});
  };
  add(id_, links_json());
  for (const auto& [id, where] : ask) {
    add(id, fetch(where, "/cluster/links"));
    // A member's calibration, fetched the first time it is seen calibrated.
    if (std::find(calibrate.begin(), calibrate.end(), id) == calibrate.end() || calibrations_.count(id)) continue;
    const nlohmann::json spec = fetch(where, "/cluster/machine");
    try {
      calibrations_[id] = parallel::machine_from_json(spec, "member " + id + "'s calibration");
    } catch (const std::exception& e) {
      calibrations_[id] = std::nullopt;
      say(std::string("planning member ") + id + " as uncalibrated: " + e.what());
    }
  }
  for (auto& m : machines)
    if (const auto it = calibrations_.find(m.id); it != calibrations_.end() && it->second) m.calibrated = it->second;
  for (auto it = calibrations_.begin(); it != calibrations_.end();)  // forget members that left
    it = std::any_of(machines.begin(), machines.end(), [&](const auto& m) { return m.id == it->first; })
             ? std::next(it)
             : calibrations_.erase(it);
  const std::vector<parallel::MeasuredPath> chosen = parallel::choose_paths(paths);
  nlohmann::json plan;
  nlohmann::json links = nlohmann::json::array();
  for (const auto& p : chosen)
    links.push_back({{"between", {p.from, p.to}}, {"address", p.address}, {"local", p.local}, {"rtt_us", p.rtt_us},
                     {"mbit_s", p.mbit_s}});
  std::string inputs;
  for (const auto& m : machines) inputs += m.id + (m.calibrated ? "+" : "") + ",";
  inputs += links.dump();
  bool same;
  {
    std::lock_guard lock(mu_);
    same = inputs == plan_inputs_;
  }
  if (same) return lead();
  std::optional<parallel::DiscoveredPlan> chosen_plan;
  if (!model_) {
    plan = {{"error", "no model given (orchard cluster up -m MODEL)"}, {"links", links}};
  } else {
    try {
      const parallel::DiscoveredPlan p = parallel::plan_discovered(
          *model_, machines, chosen, {},
          o_.parallel == "auto" ? std::nullopt : std::optional<parallel::Kind>(parallel::parse_kind(o_.parallel)));
      chosen_plan = p;
      plan = {{"split", p.prediction.candidate.label()},
              {"machines", p.machines},
              {"tokens_per_s", p.prediction.tg_tps},
              {"ttft_ms", p.prediction.ttft_s * 1e3},
              {"why", p.why},
              {"links", links}};
      // Which machines the planner knew by their calibration (the others: rough CPU rates).
      plan["calibrated"] = nlohmann::json::array();
      for (const auto& m : machines)
        if (m.calibrated) plan["calibrated"].push_back(m.id);
      if (!p.bottleneck.address.empty()) plan["slowest_link"] = p.bottleneck.address;
    } catch (const std::exception& e) {
      plan = {{"error", e.what()}, {"links", links}};
    }
  }
  const std::string line = plan.contains("why") ? "plan: " + plan["why"].get<std::string>()
                                                : "no plan: " + plan["error"].get<std::string>();
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    // Logged when the plan changes, not each time a link is measured again.
    const auto what = [](const nlohmann::json& p) {
      return p.is_object() ? p.value("split", std::string()) + p.value("machines", nlohmann::json()).dump() +
                                 p.value("error", std::string())
                           : std::string();
    };
    changed = what(plan_) != what(plan);
    if (changed) plan_since_ms_ = platform::unix_time_ms();
    plan_ = plan;
    plan_inputs_ = inputs;
    plan_chosen_ = chosen_plan;
    paths_ = chosen;
  }
  if (changed) say(line);
  lead();
}

nlohmann::json ClusterAgent::status() const {
  nlohmann::json job;
  {
    std::lock_guard job_lock(job_mu_);
    job = {{"state", job_state_}};
    if (job_)
      job["id"] = job_->id, job["split"] = job_->split, job["machines"] = job_->machines, job["backend"] = job_->backend;
    if (job_ || rank_.job().size())
      job["api"] = "http://" + o_.rank.api_host + ":" + std::to_string(o_.rank.api_port);
  }
  std::lock_guard lock(mu_);
  const int64_t now = platform::unix_time_ms();
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [id, m] : members_.members()) {
    const Announcement& a = m.announcement;
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& p : m.paths) {
      nlohmann::json j = {{"address", p.address}, {"local", p.local}, {"heard_ms_ago", now - p.last_seen_ms}};
      for (const Measured& x : measured_)
        if (x.of(id, p.address, p.local)) {
          if (x.error.empty()) j["rtt_us"] = x.rtt_us, j["mbit_s"] = x.mbit_s;
          else j["error"] = x.error;
        }
      paths.push_back(j);
    }
    members.push_back({{"id", id},
                       {"name", a.name},
                       {"version", a.version},
                       {"cores", a.cores},
                       {"memory", a.memory_bytes},
                       {"available", a.available_bytes},
                       {"rdma", a.rdma},
                       {"calibrated", a.calibrated},
                       {"model", a.model},
                       {"model_bytes", a.model_bytes},
                       {"control_port", a.control_port},
                       {"heard_ms_ago", now - m.last_seen_ms},
                       {"paths", paths}});
  }
  nlohmann::json refused = nlohmann::json::array();
  for (const auto& [id, why] : members_.refused()) refused.push_back(why);
  return {{"self", {{"id", id_}, {"name", o_.name}, {"version", o_.version}, {"control_port", control_port_}}},
          {"leader", leader_},
          {"members", members},
          {"refused", refused},
          {"strangers", {{"ignored", strangers_}, {"from", stranger_sources_}}},
          {"timeout_ms", members_.timeout_ms()},
          {"plan", plan_},
          {"job", job}};
}

}  // namespace orchard::serve
