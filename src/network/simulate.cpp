#include "network/simulate.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <random>

#include "network/job_store.h"
#include "network/protocol_names.h"
#include "parallel/model_cost.h"
#include "platform/platform.h"

namespace orchard::network {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

constexpr int kJobSlots = 4;  // each simulated node's max_jobs

// The models simulated nodes offer: the planner's shapes, in Q4_0.
const char* const kModels[] = {"llama-3.1-8b", "llama-3.3-70b"};

ModelInfo model_info(const std::string& spec) {
  ModelInfo m;
  m.name = spec;
  m.spec = spec;
  m.shape = parallel::model_spec(spec, DType::Q4_0);
  m.shape.name = spec;
  return m;
}

NodeInfo simulated_node(int i, std::mt19937_64& rng) {
  NodeInfo n;
  n.id = "sim-" + std::to_string(i);
  n.owner = "owner-" + std::to_string(i % 997);
  MachineInfo m;
  m.name = n.id;
  m.chip = "cpu";
  m.memory_bytes = (uint64_t{16} << (rng() % 5)) << 30;  // 16 GiB … 256 GiB
  m.mem_bw_gbs = 50.0 + static_cast<double>(rng() % 750);
  m.cores = 8 + static_cast<int>(rng() % 25);
  n.machines.push_back(m);
  n.models.push_back(model_info(kModels[0]));
  if (rng() % 3 == 0) n.models.push_back(model_info(kModels[1]));
  n.max_context = 32768;
  n.max_jobs = kJobSlots;
  n.lending = Lending::Dedicated;
  return n;
}

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

SimulateReport simulate(const SimulateOptions& o, const std::function<void(const std::string&)>& progress) {
  if (o.nodes < 1 || o.jobs < 1 || o.batch < 1) throw Error("simulate: give at least one node, one job and a batch of one");
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  StoreOptions so;
  so.heartbeat_timeout_ms = 3'600'000;  // simulated nodes stay fresh for the whole run
  so.queue_timeout_ms = 3'600'000;
  so.wait_for_disk = o.wait_for_disk;
  so.assign_batch = o.batch;
  JobStore store = JobStore::open(o.store, so);
  std::mt19937_64 rng(o.seed);
  SimulateReport r;
  r.nodes = o.nodes;
  r.jobs = o.jobs;

  const auto t_reg = Clock::now();
  for (int i = 0; i < o.nodes; ++i) {
    store.register_node(simulated_node(i, rng), unix_now_ms());
    if ((i + 1) % 10'000 == 0) say("registered " + std::to_string(i + 1) + " nodes");
  }
  r.register_s = seconds_since(t_reg);
  say("registered " + std::to_string(o.nodes) + " nodes in " + std::to_string(r.register_s) + " s");

  // Every node's rows read and its models planned once, as a coordinator does at start.
  const auto t_index = Clock::now();
  store.warm_index();
  r.index_s = seconds_since(t_index);
  say("placement index of " + std::to_string(o.nodes) + " nodes built in " + std::to_string(r.index_s) + " s");

  // Clients submit a batch (not timed), the scheduler places the queued batch in one
  // transaction (timed: each job's placement takes its batch's time). Jobs keep running until
  // half the network's job slots are in use, so placement has to pass over busy nodes.
  const size_t keep_running = static_cast<size_t>(o.nodes) * kJobSlots / 2;
  std::deque<std::string> running;  // the nodes of running jobs, oldest first
  auto finish_oldest = [&] {
    if (const auto w = store.next_job_for(running.front(), unix_now_ms()))
      store.complete(w->job_id, w->attempt, running.front(), {512, 0, "stop"}, unix_now_ms());
    running.pop_front();
  };
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(o.jobs));
  const auto t_report = Clock::now();
  auto last_report = t_report;
  for (int j = 0; j < o.jobs;) {
    for (const int end = std::min(o.jobs, j + o.batch); j < end; ++j) {
      JobRequest req;
      req.client = "simulated-client";
      req.model = kModels[rng() % 4 == 0 ? 1 : 0];
      req.prompt_tokens = 32 + static_cast<int64_t>(rng() % 4000);
      req.max_tokens = 16 + static_cast<int64_t>(rng() % 1000);
      req.n_ctx = req.prompt_tokens + req.max_tokens;
      req.request = {{"api", kCompletionsApi},
                     {"body", {{"model", req.model}, {"prompt", "simulated"}, {"max_tokens", req.max_tokens}}}};
      store.submit(req, unix_now_ms());
    }
    const auto t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    const std::vector<AssignResult> batch = store.assign_queued(unix_now_ms());
    const double batch_ms = seconds_since(t0) * 1000;
    r.place_cpu_s += cpu_seconds() - cpu0;
    for (const AssignResult& a : batch) {
      if (a.state == JobState::Assigned) {
        ++r.placed;
        ms.push_back(batch_ms);
        running.push_back(a.node_id);
      } else if (a.state == JobState::Failed) {
        ++r.failed;
      }
    }
    r.place_s += batch_ms / 1000;
    while (running.size() > keep_running) finish_oldest();
    if (seconds_since(last_report) > 5) {
      last_report = Clock::now();
      say("placed " + std::to_string(r.placed) + " of " + std::to_string(o.jobs) + " jobs");
    }
  }
  // What is still queued gets its slot as the running jobs finish.
  while (r.placed + r.failed < o.jobs && !running.empty()) {
    finish_oldest();
    for (const AssignResult& a : store.assign_queued(unix_now_ms())) {
      if (a.state == JobState::Assigned) ++r.placed, running.push_back(a.node_id);
      if (a.state == JobState::Failed) ++r.failed;
    }
  }
  while (!running.empty()) finish_oldest();
  r.waiting = o.jobs - r.placed - r.failed;
  if (ms.empty()) ms.push_back(0);
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  r.p50_ms = at(0.5);
  r.p99_ms = at(0.99);
  r.max_ms = ms.back();
  r.placements_per_s = r.place_s > 0 ? static_cast<double>(ms.size()) / r.place_s : 0;
  r.placements_per_cpu_s = r.place_cpu_s > 0 ? static_cast<double>(ms.size()) / r.place_cpu_s : 0;
  r.peak_rss_mib = platform::peak_resident_mib();
  return r;
}

}  // namespace orchard::network
