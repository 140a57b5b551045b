// Audits and settlements: the job store's side of checking nodes' work (docs/verification.md).
// A completed job's payment waits in `settlements` until the audit window closes and no audit
// of it runs. A failed audit is confirmed by a second auditor of a third owner; only then is
// anyone banned, and a banned node forfeits every payment it still waits for.
#include "network/job_store.h"

namespace orchard::network {

Banned JobStore::banned(const std::string& node_id, const std::string& why) const {
  return Banned(where() + ": node '" + node_id + "' was caught by an audit and gets no more work: " + why);
}

void JobStore::check_not_banned(const std::string& node_id) {
  sql::Stmt s(db(), "SELECT banned FROM nodes WHERE id = ?1");
  s.bind(1, node_id);
  if (s.step() && !s.text(0).empty()) throw banned(node_id, s.text(0));
}

std::optional<std::string> JobStore::queue_audit_in(const std::string& job_id, const std::vector<std::string>& excluded,
                                                    int64_t now_ms) {
  sql::Stmt j(db(), "SELECT kind, model, request, n_ctx, prompt_tokens, state FROM jobs WHERE id = ?1");
  j.bind(1, job_id);
  if (!j.step() || j.text(0) != kClientJob || j.text(5) != "done") return std::nullopt;
  const Completion c = done_completion(job_id);
  // Every chunk must be this attempt's: an audit judges one node.
  sql::Stmt others(db(), "SELECT count(*) FROM outputs WHERE job_id = ?1 AND attempt <> ?2");
  others.bind(1, job_id).bind(2, c.attempt).step();
  if (others.i64(0) > 0) return std::nullopt;
  std::vector<std::vector<int32_t>> chunks;
  output_of(job_id, &chunks);
  AuditRequest a;
  a.request = nlohmann::json::parse(j.text(2));
  for (const auto& chunk : chunks) {
    if (chunk.empty()) return std::nullopt;  // a node that sent no token ids: nothing to score
    a.tokens.insert(a.tokens.end(), chunk.begin(), chunk.end());
  }
  if (a.tokens.empty()) return std::nullopt;
  // The audited node's file: the auditor must hold the same bytes.
  std::string sha;
  sql::Stmt n(db(), "SELECT info FROM nodes WHERE id = ?1");
  n.bind(1, c.node_id);
  if (n.step()) {
    const NodeInfo info = node_info_from_json(nlohmann::json::parse(n.text(0)));
    if (const ModelInfo* m = info.find_model(j.text(1))) sha = m->sha256;
  }
  std::vector<std::string> owners = excluded;
  owners.push_back(c.owner);
  const std::string id = "audit-" + protocol::random_hex(8);
  const nlohmann::json request = {{"api", kAuditApi}, {"body", to_json(a)}};
  const int64_t n_ctx = j.i64(3);
  sql::Stmt ins(db(),
                "INSERT INTO jobs(id, client, model, request, n_ctx, prompt_tokens, max_tokens, state, created_at, "
                "queued_at, kind, audit_of, exclude_owners, model_sha256) "
                "VALUES(?1, ?2, ?3, ?4, ?5, ?6, 1, 'queued', ?7, ?7, ?8, ?9, ?10, ?11)");
  ins.bind(1, id).bind(2, std::string(kNetworkAccount)).bind(3, j.text(1)).bind(4, request.dump()).bind(5, n_ctx);
  ins.bind(6, std::min<int64_t>(n_ctx, j.i64(4) + static_cast<int64_t>(a.tokens.size()))).bind(7, now_ms);
  ins.bind(8, std::string(kAuditJob)).bind(9, job_id).bind(10, nlohmann::json(owners).dump()).bind(11, sha).step();
  // Placed now (or failed now, when no node may ever audit it).
  assign_in(id, now_ms);
  return id;
}

std::optional<std::string> JobStore::submit_audit(const std::string& job_id, int64_t now_ms) {
  return db().write([&]() -> std::optional<std::string> {
    sql::Stmt state(db(), "SELECT audit FROM settlements WHERE job_id = ?1");
    state.bind(1, job_id);
    if (!state.step() || !state.text(0).empty()) return std::nullopt;  // not completed, or audited already
    const auto id = queue_audit_in(job_id, {}, now_ms);
    if (!id) return std::nullopt;
    sql::Stmt up(db(), "UPDATE settlements SET audit = 'running', audit_job = ?2 WHERE job_id = ?1");
    up.bind(1, job_id).bind(2, *id).step();
    return id;
  });
}

std::optional<AuditTask> JobStore::audit_task(const std::string& audit_job_id) {
  return db().read([&]() -> std::optional<AuditTask> {
    sql::Stmt j(db(), "SELECT audit_of, request FROM jobs WHERE id = ?1 AND kind = 'audit'");
    j.bind(1, audit_job_id);
    if (!j.step()) return std::nullopt;
    AuditTask t;
    t.audit_job = audit_job_id;
    t.audited_job = j.text(0);
    // The store wrote this request itself (queue_audit_in).
    const nlohmann::json request = nlohmann::json::parse(j.text(1));
    t.tokens = request["body"]["tokens"].size();
    auto done_by = [&](const std::string& job, std::string& node, std::string* owner) {
      sql::Stmt n(db(),
                  "SELECT a.node_id, n.owner FROM attempts a JOIN nodes n ON n.id = a.node_id "
                  "WHERE a.job_id = ?1 AND a.state = 'done'");
      n.bind(1, job);
      if (!n.step()) return false;
      node = n.text(0);
      if (owner) *owner = n.text(1);
      return true;
    };
    if (!done_by(t.audited_job, t.node_id, &t.owner))
      throw Error(where() + ": audit '" + audit_job_id + "' checks job '" + t.audited_job + "', which is not done");
    done_by(audit_job_id, t.auditor_node, &t.auditor_owner);
    sql::Stmt s(db(), "SELECT first_audit, note FROM settlements WHERE job_id = ?1");
    s.bind(1, t.audited_job);
    if (s.step() && !s.text(0).empty() && s.text(0) != audit_job_id) {
      t.round = 2;
      t.first_audit = s.text(0);
      t.first_why = s.text(1);
      done_by(t.first_audit, t.first_auditor_node, nullptr);
    }
    return t;
  });
}

bool JobStore::ban_in(const std::string& node_id, const std::string& reason, int64_t now_ms) {
  sql::Stmt ban(db(), std::string("UPDATE nodes SET banned = ?2, reliability = 0, ") + kNextSeq + " WHERE id = ?1 AND banned = ''");
  ban.bind(1, node_id).bind(2, reason).step();
  if (ban.changes() == 0) return false;  // banned already
  // What it holds goes to other nodes now, not when its lease runs out.
  std::vector<std::string> held;
  {
    sql::Stmt live(db(), "SELECT job_id FROM attempts WHERE node_id = ?1 AND state IN ('assigned', 'running')");
    live.bind(1, node_id);
    while (live.step()) held.push_back(live.text(0));
  }
  sql::Stmt drop(db(),
                 "UPDATE attempts SET state = 'abandoned', ended_at = ?2 WHERE node_id = ?1 AND state IN ('assigned', 'running')");
  drop.bind(1, node_id).bind(2, now_ms).step();
  for (const std::string& job : held) {
    sql::Stmt requeue(db(), "UPDATE jobs SET state = 'queued', queued_at = ?2 WHERE id = ?1");
    requeue.bind(1, job).bind(2, now_ms).step();
  }
  // Audits of its other work decide nothing now: its payments are forfeited below.
  sql::Stmt audits(db(),
                   "UPDATE jobs SET state = 'cancelled', waiting = '', finished_at = ?2 WHERE kind = 'audit' "
                   "AND state IN ('queued', 'assigned', 'running') AND audit_of IN "
                   "(SELECT job_id FROM attempts WHERE node_id = ?1 AND state = 'done')");
  audits.bind(1, node_id).bind(2, now_ms).step();
  // From the few live attempts to their jobs by key, not from every cancelled job ever.
  const std::string job_cancelled = "EXISTS (SELECT 1 FROM jobs j WHERE j.id = attempts.job_id AND j.state = 'cancelled')";
  sql::Stmt their_nodes(db(), log_live_nodes_sql(job_cancelled));
  their_nodes.step();
  sql::Stmt orphans(db(),
                    "UPDATE attempts SET state = 'cancelled', ended_at = ?1 WHERE state IN ('assigned', 'running') AND " +
                        job_cancelled);
  orphans.bind(1, now_ms).step();
  sql::Stmt forfeit(db(),
                    "UPDATE settlements SET state = 'forfeited', settled_at = ?2, note = ?3 "
                    "WHERE node_id = ?1 AND state = 'pending'");
  forfeit.bind(1, node_id).bind(2, now_ms).bind(3, "forfeited: the node was banned: " + reason).step();
  return true;
}

AuditDecision JobStore::record_audit(const AuditTask& t, AuditOutcome outcome, const std::string& why, int64_t now_ms) {
  return db().write([&] {
    AuditDecision d;
    // Once per audit job: a verdict recorded already (the completion's, or the sweep's retry of
    // one that failed half-way) has moved the settlement on.
    sql::Stmt now(db(), "SELECT audit, audit_job FROM settlements WHERE job_id = ?1");
    now.bind(1, t.audited_job);
    if (!now.step() || now.text(1) != t.audit_job || (now.text(0) != "running" && now.text(0) != "confirming")) return d;
    touch_node_in(t.node_id);  // held while a failed audit is confirmed, free after
    auto set = [&](const char* audit, const std::string& note) {
      sql::Stmt up(db(), "UPDATE settlements SET audit = ?2, note = ?3 WHERE job_id = ?1");
      up.bind(1, t.audited_job).bind(2, std::string(audit)).bind(3, note).step();
    };
    if (t.round == 1 && outcome == AuditOutcome::Failed) {
      // One auditor's word is not enough: it might run another file, or lie. A third owner decides.
      const auto second = queue_audit_in(t.audited_job, {t.auditor_owner}, now_ms);
      if (!second) {
        set("inconclusive", "unconfirmed: " + why);
        return d;
      }
      sql::Stmt up(db(),
                   "UPDATE settlements SET audit = 'confirming', first_audit = ?2, audit_job = ?3, note = ?4 WHERE job_id = ?1");
      up.bind(1, t.audited_job).bind(2, t.audit_job).bind(3, *second).bind(4, why).step();
      d.confirmation = *second;
      return d;
    }
    if (outcome != AuditOutcome::Failed || t.round == 1) {
      set(to_string(outcome), why);
      if (t.round == 2 && outcome == AuditOutcome::Passed && !t.first_auditor_node.empty()) {
        // The first auditor failed output that another copy of the same file accepts.
        if (ban_in(t.first_auditor_node,
                   "its audit " + t.first_audit + " of job " + t.audited_job + " reported '" + t.first_why +
                       "', which audit " + t.audit_job + " by another owner contradicted (" + why + ")",
                   now_ms))
          d.banned_node = t.first_auditor_node;
      }
      return d;
    }
    // Two auditors of two other owners agree.
    set("failed", why);
    if (ban_in(t.node_id, "audits " + t.first_audit + " and " + t.audit_job + " of job " + t.audited_job + ": " + why, now_ms))
      d.banned_node = t.node_id;
    return d;
  });
}

std::vector<std::string> JobStore::unjudged_audits() {
  sql::Stmt s(db(),
              "SELECT s.audit_job FROM settlements s JOIN jobs a ON a.id = s.audit_job "
              "WHERE s.audit IN ('running', 'confirming') AND a.state = 'done' ORDER BY s.audit_job");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

int64_t JobStore::audits_passed(const std::string& node_id, int64_t up_to) {
  // Client jobs only: every registration brings a canary, so counting those would let a node
  // leave probation by registering again and again.
  sql::Stmt s(db(),
              "SELECT count(*) FROM (SELECT 1 FROM settlements s JOIN jobs j ON j.id = s.job_id WHERE s.node_id = ?1 "
              "AND s.audit = 'passed' AND j.kind = 'client' LIMIT ?2) p");
  s.bind(1, node_id).bind(2, up_to);
  return s.step() ? s.i64(0) : 0;
}

std::vector<Completion> JobStore::due_settlements(int64_t now_ms) {
  return db().read([&] {
    std::vector<std::string> due;
    {
      sql::Stmt s(db(),
                  "SELECT s.job_id FROM settlements s JOIN nodes n ON n.id = s.node_id "
                  "LEFT JOIN jobs a ON a.id = s.audit_job "
                  "WHERE s.state = 'pending' AND s.due_at <= ?1 AND n.banned = '' "
                  "AND (s.audit NOT IN ('running', 'confirming') OR a.state IN ('failed', 'cancelled')) "
                  "ORDER BY s.due_at, s.job_id");
      s.bind(1, now_ms);
      while (s.step()) due.push_back(s.text(0));
    }
    std::vector<Completion> out;
    for (const std::string& id : due) out.push_back(done_completion(id));
    return out;
  });
}

void JobStore::mark_paid(const std::string& job_id, int64_t now_ms) {
  db().write([&] {
    sql::Stmt s(db(), "UPDATE settlements SET state = 'paid', settled_at = ?2 WHERE job_id = ?1 AND state = 'pending'");
    s.bind(1, job_id).bind(2, now_ms).step();
  });
}

std::optional<SettlementState> JobStore::settlement(const std::string& job_id) {
  sql::Stmt s(db(), "SELECT state FROM settlements WHERE job_id = ?1");
  s.bind(1, job_id);
  if (!s.step()) return std::nullopt;
  const std::string st = s.text(0);
  return st == "paid" ? SettlementState::Paid : st == "forfeited" ? SettlementState::Forfeited : SettlementState::Pending;
}

}  // namespace orchard::network
