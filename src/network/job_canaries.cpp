// Canaries: greedy requests whose answers the operator computed with the pinned file, sent to
// one node at a time as if a client had asked (docs/verification.md). What the node returns is
// checked against the answer; how fast it returned it is the node's measured speed.
#include <algorithm>

#include "network/job_store.h"

namespace orchard::network {

namespace {

Canary canary_of(sql::Stmt& s) {
  // Written by add_canary from checked values.
  Canary c;
  c.id = s.text(0);
  c.model = s.text(1);
  c.model_sha256 = s.text(2);
  c.request = nlohmann::json::parse(s.text(3));
  c.tokens = nlohmann::json::parse(s.text(4)).get<std::vector<int32_t>>();
  c.margins = nlohmann::json::parse(s.text(5)).get<std::vector<double>>();
  return c;
}

constexpr const char* kCanaryColumns = "id, model, model_sha256, request, tokens, margins";

}  // namespace

std::string JobStore::add_canary(const Canary& c, int64_t now_ms) {
  if (c.model.empty() || !is_sha256_hex(c.model_sha256))
    throw Error(where() + ": a canary needs its model's name and the file's SHA-256");
  if (c.tokens.empty() || c.margins.size() != c.tokens.size())
    throw Error(where() + ": a canary needs its answer's tokens, each with its margin");
  const std::string api = c.request.is_object() ? c.request.value("api", "") : "";
  if ((api != kChatApi && api != kCompletionsApi) || !c.request.contains("body"))
    throw Error(where() + ": a canary's request is {\"api\": \"chat\" | \"completions\", \"body\": {…}}");
  const std::string id = c.id.empty() ? "canary-" + protocol::random_hex(4) : c.id;
  db().write([&] {
    sql::Stmt ins(db(),
                  "INSERT INTO canaries(id, model, model_sha256, request, tokens, margins, created_at) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    ins.bind(1, id).bind(2, c.model).bind(3, c.model_sha256).bind(4, c.request.dump());
    ins.bind(5, nlohmann::json(c.tokens).dump()).bind(6, nlohmann::json(c.margins).dump()).bind(7, now_ms).step();
  });
  return id;
}

std::vector<Canary> JobStore::canaries() {
  sql::Stmt s(db(), std::string("SELECT ") + kCanaryColumns + " FROM canaries ORDER BY model, id");
  std::vector<Canary> out;
  while (s.step()) out.push_back(canary_of(s));
  return out;
}

bool JobStore::remove_canary(const std::string& id) {
  return db().write([&] {
    sql::Stmt s(db(), "DELETE FROM canaries WHERE id = ?1");
    s.bind(1, id);
    return s.changes() > 0;
  });
}

std::optional<std::string> JobStore::submit_canary(const std::string& node_id, uint64_t pick, int64_t now_ms) {
  return db().write([&]() -> std::optional<std::string> {
    sql::Stmt n(db(), "SELECT info, banned FROM nodes WHERE id = ?1");
    n.bind(1, node_id);
    if (!n.step() || !n.text(1).empty()) return std::nullopt;
    const NodeInfo info = node_info_from_json(nlohmann::json::parse(n.text(0)));
    std::vector<Canary> fit;
    {
      sql::Stmt s(db(), std::string("SELECT ") + kCanaryColumns + " FROM canaries ORDER BY id");
      while (s.step()) {
        Canary c = canary_of(s);
        const ModelInfo* m = info.find_model(c.model);
        if (m && m->sha256 == c.model_sha256) fit.push_back(std::move(c));
      }
    }
    if (fit.empty()) return std::nullopt;
    const Canary& c = fit[pick % fit.size()];
    const std::string id = new_job_id();  // a client's job, as far as the node can tell
    // What a client's job of this body would get (the coordinator applies the body's max_tokens).
    const nlohmann::json& body = c.request["body"];
    const int64_t max_tokens = body.contains("max_tokens") && body["max_tokens"].is_number_integer()
                                   ? body["max_tokens"].get<int64_t>()
                                   : static_cast<int64_t>(c.tokens.size());
    const int64_t n_ctx = std::min<int64_t>(info.max_context, 4096);
    sql::Stmt ins(db(),
                  "INSERT INTO jobs(id, client, model, request, n_ctx, prompt_tokens, max_tokens, state, created_at, "
                  "queued_at, kind, audit_of, only_node, model_sha256) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?8, ?9, ?10, ?11, ?12)");
    ins.bind(1, id).bind(2, std::string(kNetworkAccount)).bind(3, c.model).bind(4, c.request.dump()).bind(5, n_ctx);
    ins.bind(6, std::max<int64_t>(1, n_ctx - max_tokens)).bind(7, max_tokens).bind(8, now_ms);
    ins.bind(9, std::string(kCanaryJob)).bind(10, c.id).bind(11, node_id).bind(12, c.model_sha256).step();
    // Placed now: the node holds it before any client's job that arrives next can be placed
    // there first (a node answers its canary before it serves anyone).
    assign_in(id, now_ms);
    return id;
  });
}

std::optional<CanaryRun> JobStore::canary_run(const std::string& job_id) {
  return db().read([&]() -> std::optional<CanaryRun> {
    sql::Stmt j(db(), "SELECT audit_of FROM jobs WHERE id = ?1 AND kind = 'canary' AND state = 'done'");
    j.bind(1, job_id);
    if (!j.step()) return std::nullopt;
    CanaryRun r;
    r.job_id = job_id;
    sql::Stmt c(db(), std::string("SELECT ") + kCanaryColumns + " FROM canaries WHERE id = ?1");
    c.bind(1, j.text(0));
    if (!c.step()) return std::nullopt;  // removed meanwhile: nothing to judge by
    r.canary = canary_of(c);
    sql::Stmt a(db(),
                "SELECT a.node_id, n.owner, a.generated_tokens, a.fetched_at, a.ended_at, a.predicted_tps FROM attempts a "
                "JOIN nodes n ON n.id = a.node_id WHERE a.job_id = ?1 AND a.state = 'done'");
    a.bind(1, job_id);
    if (!a.step()) return std::nullopt;
    r.node_id = a.text(0);
    r.owner = a.text(1);
    if (!a.null(3) && !a.null(4) && a.i64(4) > a.i64(3))
      r.measured_tps = static_cast<double>(a.i64(2)) * 1000.0 / static_cast<double>(a.i64(4) - a.i64(3));
    r.predicted_tps = a.f64(5);
    std::vector<std::vector<int32_t>> chunks;
    output_of(job_id, &chunks);
    for (const auto& chunk : chunks) r.returned.insert(r.returned.end(), chunk.begin(), chunk.end());
    return r;
  });
}

void JobStore::record_canary(const CanaryRun& run, const Verdict& v, int64_t now_ms) {
  db().write([&] {
    sql::Stmt up(db(), "UPDATE settlements SET audit = ?2, note = ?3 WHERE job_id = ?1");
    up.bind(1, run.job_id).bind(2, std::string(to_string(v.outcome))).bind(3, v.why).step();
    if (v.outcome == AuditOutcome::Failed) {
      // The operator's own answer: no second opinion needed.
      ban_in(run.node_id, "canary " + run.canary.id + " (job " + run.job_id + "): " + v.why, now_ms);
      return;
    }
    if (run.measured_tps > 0 && run.predicted_tps > 0) {
      // The prediction is bandwidth-bound: the share of it delivered is the share of the
      // reported bandwidth the node has (no more than it reported).
      const double ratio = run.measured_tps / run.predicted_tps;
      double reported = 0;
      sql::Stmt n(db(), "SELECT info FROM nodes WHERE id = ?1");
      n.bind(1, run.node_id);
      if (n.step())
        for (const MachineInfo& m : node_info_from_json(nlohmann::json::parse(n.text(0))).machines)
          reported = std::max(reported, m.mem_bw_gbs);
      sql::Stmt sp(db(), std::string("UPDATE nodes SET speed_ratio = ?2, measured_gbs = ?3, ") + kNextSeq + " WHERE id = ?1");
      sp.bind(1, run.node_id).bind(2, ratio).bind(3, std::min(1.0, ratio) * reported).step();
    }
  });
}

}  // namespace orchard::network
