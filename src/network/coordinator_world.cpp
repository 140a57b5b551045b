// The world page and its data (docs/network-protocol.md, "Public"): every node with its
// machines, models, lending policy, state, record and region, the network's totals, the owners
// who earned most, and the map the page draws them on. Public: it
// shows what nodes chose to tell (no keys, no client accounts, no job contents).
#include "network/coordinator_state.h"
#include "serve/http_util.h"

namespace orchard::network {

extern const char* const kWorldPage;  // src/network/web/world.html, compiled in
extern const char* const kWorldMap;   // src/network/web/world_map.svg, compiled in

using nlohmann::json;

namespace {

// What the page shows a node as: offline once its heartbeat is older than the timeout, else
// draining (it said so, or its owner is taking the machine back), busy (it holds attempts or
// says it is busy), or idle.
const char* node_state(const NodeView& v, bool online) {
  if (!v.banned.empty()) return "banned";
  if (!online) return "offline";
  if (v.draining || v.info.state.status == NodeStatus::Draining) return "draining";
  if (v.active_jobs > 0 || v.info.state.status == NodeStatus::Busy) return "busy";
  return "idle";
}

json world(Coordinator::State& s) {
  const int64_t now = unix_ms();
  const std::map<std::string, double> rates = s.tokens.rates(now);
  json nodes = json::array();
  int64_t online_nodes = 0, machines = 0;
  uint64_t memory = 0;
  std::map<JobState, int64_t> counts;
  s.with_store([&](JobStore& st) {
    counts = st.job_counts();
    for (const NodeView& v : st.nodes()) {
      const NodeStats n = st.node_stats(v.info.id);
      const bool online = now - v.last_heartbeat_ms <= s.opts.store.heartbeat_timeout_ms;
      const json info = to_json(v.info);
      json models = json::array();
      for (const ModelInfo& m : v.info.models) models.push_back(m.name);
      const auto rate = rates.find(v.info.id);
      nodes.push_back({{"id", v.info.id},
                       {"owner", v.info.owner},
                       {"hardware", to_string(v.info.hardware)},
                       {"machines", info["machines"]},
                       {"group", info.contains("group") ? info["group"] : json()},
                       {"models", models},
                       {"max_context", v.info.max_context},
                       {"lending", to_string(v.info.lending)},
                       {"status", v.draining ? "draining" : to_string(v.info.state.status)},
                       {"state", node_state(v, online)},
                       {"load", v.info.state.load},
                       {"online", online},
                       {"last_heartbeat_ms", v.last_heartbeat_ms},
                       {"jobs_served", n.jobs_served},
                       {"tokens_generated", n.tokens_generated},
                       {"handed_back", n.handed_back},
                       {"abandoned", n.abandoned},
                       {"reliability", v.reliability},
                       {"active_jobs", v.active_jobs},
                       {"tokens_per_second", rate == rates.end() ? 0.0 : rate->second},
                       {"region", info.contains("region") ? info["region"] : json()}});
      online_nodes += online;
      machines += static_cast<int64_t>(v.info.machines.size());
      for (const MachineInfo& m : v.info.machines) memory += m.memory_bytes;
    }
  });
  const json totals = {{"nodes", nodes.size()},
                       {"nodes_online", online_nodes},
                       {"machines", machines},
                       {"memory_bytes", memory},
                       {"jobs_running", counts[JobState::Assigned] + counts[JobState::Running]},
                       {"jobs_queued", counts[JobState::Queued]},
                       {"jobs_done", counts[JobState::Done]},
                       {"jobs_failed", counts[JobState::Failed]},
                       {"tokens_per_second", rates.at("")}};
  json earners = json::array();
  {
    std::lock_guard lock(s.ledger_mu);
    for (const Ledger::Earner& e : s.ledger.top_earners(10))
      earners.push_back({{"owner", e.account}, {"earned", e.earned}, {"jobs", e.jobs}});
  }
  return {{"nodes", nodes},
          {"totals", totals},
          {"earnings", earners},
          {"heartbeat_timeout_ms", s.opts.store.heartbeat_timeout_ms},
          {"now_ms", now}};
}

}  // namespace

void add_world_routes(Coordinator::State& s) {
  const auto page = [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(kWorldPage, "text/html; charset=utf-8");
  };
  s.http->Get("/", page);
  s.http->Get("/world", page);
  // The map the page draws behind its nodes: plate carrée, one unit a degree (scripts/world-map).
  s.http->Get("/world/map.svg", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "max-age=86400");
    res.set_content(kWorldMap, "image/svg+xml");
  });
  s.http->Get("/v1/world", serve::guarded(serve::openai_error, [&s](const httplib::Request&, httplib::Response& res) {
               serve::send_json(res, world(s));
             }));
}

}  // namespace orchard::network
