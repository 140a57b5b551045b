// Placing jobs: one job (`assign`), or a scheduler's pass over the oldest queued ones
// (`assign_queued`, also what a node's poll runs when nothing is assigned to it). Either way
// one transaction and a fixed number of statements whatever the count — the jobs read once,
// the nodes changed since the last look read once, then one INSERT of the attempts, one UPDATE
// of the jobs and one INSERT logging the nodes that took them. Per job that was six statements; to
// PostgreSQL a network away each one is a round trip, and even on one machine each costs two
// process wake-ups: the statements go in two round trips (Connection::send), the reads with
// BEGIN, and the writes with COMMIT.
#include <set>

#include "network/job_store.h"
#include "network/protocol_names.h"

namespace orchard::network {

namespace {

// What placement needs of a queued job, then the number its next attempt gets (queued_from).
constexpr const char* kQueuedColumns =
    "id, model, n_ctx, prompt_tokens, max_tokens, model_sha256, exclude_owners, only_node, kind, "
    "(SELECT coalesce(max(a.attempt), 0) + 1 FROM attempts a WHERE a.job_id = jobs.id)";

// A placement's transaction. Its commit does not wait for the disk (a third of a pass on
// PostgreSQL): a placement a crash loses leaves its job queued, placed again after the restart
// — and none is lost once acted on, as the node's fetch of its work waits for the disk, which
// puts the placement there first. Its statements are planned once (each reads by index), not
// at every pass. Inside another transaction, that one decides.
template <class F>
auto placement_write(sql::Connection& db, F body) {
  const bool own = !db.in_transaction();
  return db.write([&] {
    if (own) db.commit_lazily(), db.plan_once();
    return body();
  });
}

// "?first, ?first+1, …" for `n` parameters.
std::string parameters(int first, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? ", ?" : "?") + std::to_string(first + static_cast<int>(i));
  return out;
}

}  // namespace

JobStore::Queued JobStore::queued_from(sql::Stmt& j, int at) {
  Queued q{j.text(at), {j.text(at + 1), j.i64(at + 2), j.i64(at + 3), j.i64(at + 4), j.text(at + 5), {}, j.text(at + 7), false},
           j.i64(at + 9)};
  q.demand.verification = j.text(at + 8) != kClientJob;
  // A JSON list of owners the store wrote itself (audit jobs); empty for a client's job.
  if (!j.text(at + 6).empty())
    q.demand.exclude_owners = nlohmann::json::parse(j.text(at + 6)).get<std::vector<std::string>>();
  return q;
}

AssignResult JobStore::assign_in(const std::string& job_id, int64_t now_ms) {
  sql::Stmt j(db(), std::string("SELECT state, ") + kQueuedColumns + " FROM jobs WHERE id = ?1");
  j.bind(1, job_id);
  if (!j.step()) throw Error(where() + ": no job '" + job_id + "'");
  if (j.text(0) == "queued") return place_in({queued_from(j, 1)}, index_in(), now_ms).front();
  AssignResult r;
  r.job_id = job_id;
  sql::Stmt live(db(), "SELECT node_id, attempt FROM attempts WHERE job_id = ?1 AND state IN ('assigned', 'running')");
  live.bind(1, job_id);
  if (live.step()) r.node_id = live.text(0), r.attempt = live.i64(1);
  r.state = j.text(0) == "assigned"    ? JobState::Assigned
            : j.text(0) == "running"   ? JobState::Running
            : j.text(0) == "done"      ? JobState::Done
            : j.text(0) == "cancelled" ? JobState::Cancelled
                                       : JobState::Failed;
  r.reason = "not queued: already " + j.text(0);
  return r;
}

AssignResult JobStore::assign(const std::string& job_id, int64_t now_ms) {
  return placement_write(db(), [&] { return assign_in(job_id, now_ms); });
}

std::vector<AssignResult> JobStore::assign_queued(int64_t now_ms) {
  // The batch in one transaction: one commit for all of them, which is what lets a coordinator
  // place thousands a second. The batch is small (assign_batch), so the write lock is not held
  // long against another coordinator.
  return placement_write(db(), [&] { return assign_queued_in(now_ms); });
}

std::vector<AssignResult> JobStore::assign_queued_in(int64_t now_ms) {
  sql::Stmt j(db(), std::string("SELECT ") + kQueuedColumns +
                        " FROM jobs WHERE state = 'queued' ORDER BY queued_at, id LIMIT ?1");
  j.bind(1, int64_t{options_.assign_batch}).send();
  NodeIndex& index = index_in();  // its reads go in the same round trip as the jobs'
  std::vector<Queued> queued;
  while (j.step()) queued.push_back(queued_from(j, 0));
  return place_in(queued, index, now_ms);
}

void JobStore::not_placed_in(const Queued& job, const PlacementResult& placed, int64_t now_ms, AssignResult& r) {
  r.reason = placed.why_not(job.demand);
  if (placed.hopeless()) {
    fail_job(job.id, r.reason, now_ms);
    r.state = JobState::Failed;
  } else {
    sql::Stmt w(db(), "UPDATE jobs SET waiting = ?2 WHERE id = ?1");
    w.bind(1, job.id).bind(2, r.reason).send();
  }
}

JobStore::NewAttempt JobStore::new_attempt(const Queued& job, const Choice& c) {
  const NodeView& node = *index_->nodes.find(c.node_id);
  NewAttempt a;
  a.job_id = job.id;
  a.attempt = job.attempt;
  a.node_id = c.node_id;
  a.plan = c.plan.candidate.label();
  // The price classes are fixed now: what the job will cost does not change if the node
  // re-registers with other hardware while it runs.
  const parallel::ModelCost* cost = index_->nodes.cost(c.node_id, job.demand.model);
  a.size_class = to_string(size_class(cost ? cost->params : cost_of(*node.info.find_model(job.demand.model)).params));
  // The price class is what a canary measured the node deliver, not the class it names itself.
  a.hardware = to_string(node.measured_gbs ? measured_hardware_class(*node.measured_gbs) : HardwareClass::Laptop);
  a.dedicated = node.info.lending == Lending::Dedicated;
  a.predicted_tps = c.plan.tg_tps;
  return a;
}

std::vector<AssignResult> JobStore::place_in(const std::vector<Queued>& jobs, NodeIndex& index, int64_t now_ms) {
  if (jobs.empty()) return {};
  std::vector<AssignResult> out;
  std::vector<NewAttempt> attempts;
  std::set<std::string> nodes;
  for (const Queued& q : jobs) {
    AssignResult r;
    r.job_id = q.id;
    const PlacementResult placed = index.place(q.demand, {now_ms, options_.heartbeat_timeout_ms});
    if (!placed.choice) {
      not_placed_in(q, placed, now_ms, r);
    } else {
      const Choice& c = *placed.choice;
      attempts.push_back(new_attempt(q, c));
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

  constexpr int kColumns = 10;
  std::string sql =
      "INSERT INTO attempts(job_id, attempt, node_id, state, plan, size_class, hardware, dedicated, started_at, "
      "lease_deadline, predicted_tps) VALUES";
  for (size_t i = 0; i < attempts.size(); ++i) {
    const int b = static_cast<int>(i) * kColumns;
    sql += std::string(i ? ", " : " ") + "(" + parameters(b + 1, 3) + ", 'assigned', " + parameters(b + 4, 7) + ")";
  }
  sql::Stmt ins(db(), sql);
  for (size_t i = 0; i < attempts.size(); ++i) {
    const NewAttempt& a = attempts[i];
    const int b = static_cast<int>(i) * kColumns;
    ins.bind(b + 1, a.job_id).bind(b + 2, a.attempt).bind(b + 3, a.node_id).bind(b + 4, a.plan);
    ins.bind(b + 5, a.size_class).bind(b + 6, a.hardware).bind(b + 7, a.dedicated).bind(b + 8, now_ms);
    ins.bind(b + 9, now_ms + options_.lease_ms).bind(b + 10, a.predicted_tps);
  }
  ins.send();  // these go with the change log's statement below and the COMMIT: one round trip
  sql::Stmt up(db(), "UPDATE jobs SET state = 'assigned', waiting = '' WHERE id IN (" + parameters(1, attempts.size()) + ")");
  for (size_t i = 0; i < attempts.size(); ++i) up.bind(static_cast<int>(i) + 1, attempts[i].job_id);
  up.send();
  // The nodes' live attempts changed: other coordinators' indexes read them again. This one
  // counted them already (add_job), so when it had read the log up to here it skips them.
  nodes_changed_in(std::vector<std::string>(nodes.begin(), nodes.end()), true);
  return out;
}

}  // namespace orchard::network
