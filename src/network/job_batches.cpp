// The scheduler's pass: the oldest queued jobs placed together, in one transaction and a fixed
// number of statements whatever the batch's size — one read of the jobs, one re-read of the
// nodes written since the last pass, then one INSERT of the attempts and one UPDATE each of
// the jobs and of the nodes that took them. Per job that was six statements; to PostgreSQL a
// network away each one is a round trip.
#include <set>

#include "network/billed_usage.h"
#include "network/job_store.h"
#include "network/protocol_names.h"

namespace orchard::network {

namespace {

// "?first, ?first+1, …" for `n` parameters.
std::string parameters(int first, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? ", ?" : "?") + std::to_string(first + static_cast<int>(i));
  return out;
}

}  // namespace

JobStore::NewAttempt JobStore::new_attempt(const std::string& job_id, int64_t attempt, const Choice& c,
                                           const JobDemand& demand) {
  const NodeView& node = *index_->nodes.find(c.node_id);
  NewAttempt a;
  a.job_id = job_id;
  a.attempt = attempt;
  a.node_id = c.node_id;
  a.plan = c.plan.candidate.label();
  // The price classes are fixed now: what the job will cost does not change if the node
  // re-registers with other hardware while it runs.
  a.size_class = to_string(size_class(cost_of(*node.info.find_model(demand.model)).params));
  // The price class is what a canary measured the node deliver, not the class it names itself.
  a.hardware = to_string(node.measured_gbs ? measured_hardware_class(*node.measured_gbs) : HardwareClass::Laptop);
  a.dedicated = node.info.lending == Lending::Dedicated;
  a.predicted_tps = c.plan.tg_tps;
  return a;
}

void JobStore::insert_attempts_in(const std::vector<NewAttempt>& rows, int64_t now_ms) {
  if (rows.empty()) return;
  constexpr int kColumns = 10;
  std::string sql =
      "INSERT INTO attempts(job_id, attempt, node_id, state, plan, size_class, hardware, dedicated, started_at, "
      "lease_deadline, predicted_tps) VALUES";
  for (size_t i = 0; i < rows.size(); ++i) {
    const int b = static_cast<int>(i) * kColumns;
    sql += std::string(i ? ", " : " ") + "(?" + std::to_string(b + 1) + ", ?" + std::to_string(b + 2) + ", ?" +
           std::to_string(b + 3) + ", 'assigned', " + parameters(b + 4, 7) + ")";
  }
  sql::Stmt ins(db(), sql);
  for (size_t i = 0; i < rows.size(); ++i) {
    const NewAttempt& a = rows[i];
    const int b = static_cast<int>(i) * kColumns;
    ins.bind(b + 1, a.job_id).bind(b + 2, a.attempt).bind(b + 3, a.node_id).bind(b + 4, a.plan);
    ins.bind(b + 5, a.size_class).bind(b + 6, a.hardware).bind(b + 7, a.dedicated).bind(b + 8, now_ms);
    ins.bind(b + 9, now_ms + options_.lease_ms).bind(b + 10, a.predicted_tps);
  }
  ins.step();
}

std::vector<AssignResult> JobStore::assign_queued_in(int64_t now_ms) {
  struct Queued {
    std::string id;
    JobDemand demand;
    int64_t attempt = 0;
  };
  std::vector<Queued> queued;
  {
    sql::Stmt j(db(),
                "SELECT id, model, n_ctx, prompt_tokens, max_tokens, model_sha256, exclude_owners, only_node, kind, "
                "(SELECT coalesce(max(a.attempt), 0) + 1 FROM attempts a WHERE a.job_id = jobs.id) FROM jobs "
                "WHERE state = 'queued' ORDER BY queued_at, id LIMIT ?1");
    j.bind(1, int64_t{options_.assign_batch});
    while (j.step()) {
      Queued q{j.text(0), JobDemand{j.text(1), j.i64(2), j.i64(3), j.i64(4), j.text(5), {}, j.text(7), false}, j.i64(9)};
      q.demand.verification = j.text(8) != kClientJob;
      // A JSON list of owners the store wrote itself (audit jobs); empty for a client's job.
      if (!j.text(6).empty()) q.demand.exclude_owners = nlohmann::json::parse(j.text(6)).get<std::vector<std::string>>();
      queued.push_back(std::move(q));
    }
  }
  if (queued.empty()) return {};
  NodeIndex& index = index_in();
  std::vector<AssignResult> out;
  std::vector<NewAttempt> attempts;
  std::set<std::string> nodes;
  for (const Queued& q : queued) {
    AssignResult r;
    r.job_id = q.id;
    const PlacementResult placed = index.place(q.demand, {now_ms, options_.heartbeat_timeout_ms});
    if (!placed.choice) {
      not_placed_in(q.id, q.demand, placed, now_ms, r);
    } else {
      const Choice& c = *placed.choice;
      attempts.push_back(new_attempt(q.id, q.attempt, c, q.demand));
      index.add_job(c.node_id);  // the next job of the batch sees the node one job busier
      nodes.insert(c.node_id);
      r.state = JobState::Assigned;
      r.node_id = c.node_id;
      r.attempt = q.attempt;
      r.reason = c.reason;
    }
    out.push_back(std::move(r));
  }
  if (attempts.empty()) return out;
  insert_attempts_in(attempts, now_ms);
  sql::Stmt up(db(), "UPDATE jobs SET state = 'assigned', waiting = '' WHERE id IN (" + parameters(1, attempts.size()) + ")");
  for (size_t i = 0; i < attempts.size(); ++i) up.bind(static_cast<int>(i) + 1, attempts[i].job_id);
  up.step();
  // The nodes' rows change with their new attempts: other coordinators' indexes (and this
  // one's next pass) read them again.
  sql::Stmt touch(db(), std::string("UPDATE nodes SET ") + kNextSeq + " WHERE id IN (" + parameters(1, nodes.size()) + ")");
  int at = 1;
  for (const std::string& n : nodes) touch.bind(at++, n);
  touch.step();
  return out;
}

}  // namespace orchard::network
