// The job store's file, its nodes, submitting jobs and reading them back. Claims, leases and
// output are in job_attempts.cpp.
#include "network/job_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "network/protocol_names.h"

namespace orchard::network {
namespace {

constexpr const char* kJobsFormat = "orchard-jobs";
// 2: node keys, token ids per output chunk, the finish reason, failed attempts.
// 3: audits and settlements (docs/verification.md); a version 2 store is upgraded when opened.
// 4: nodes.seq, for the placement index (node_index.h); a version 2 or 3 store is upgraded.
// 5: a node's pending memory challenge and the memory it proved (memory_proofs.cpp).
// 6: node_changes, the log of nodes whose live attempts changed (below).
// 7: attempts without foreign keys. 8: the queue's index holds queued jobs only; audit jobs are
// indexed by the job they audit.
constexpr const char* kJobsVersion = "8";

// Live attempts ('assigned', 'running') are the ones holding a lease; the partial UNIQUE index
// lets a job have one at a time whatever the code above does. `info` is the node's description
// as JSON (node_info.h), rewritten with each heartbeat's load and status.
constexpr const char* kJobsSchema = R"sql(
CREATE TABLE IF NOT EXISTS nodes(
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  info TEXT NOT NULL,
  registered_at INTEGER NOT NULL,
  last_heartbeat INTEGER NOT NULL,
  reliability REAL NOT NULL DEFAULT 1.0,
  draining INTEGER NOT NULL DEFAULT 0,
  public_key TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY,
  client TEXT NOT NULL,
  model TEXT NOT NULL,
  request TEXT NOT NULL,
  n_ctx INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  max_tokens INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('queued', 'assigned', 'running', 'done', 'failed', 'cancelled')),
  error TEXT NOT NULL DEFAULT '',
  waiting TEXT NOT NULL DEFAULT '',
  usage_prompt INTEGER,
  usage_generated INTEGER,
  finish_reason TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  queued_at INTEGER NOT NULL,
  finished_at INTEGER);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(state, queued_at);
CREATE TABLE IF NOT EXISTS attempts(
  job_id TEXT NOT NULL REFERENCES jobs(id),
  attempt INTEGER NOT NULL,
  node_id TEXT NOT NULL REFERENCES nodes(id),
  state TEXT NOT NULL CHECK(state IN ('assigned', 'running', 'done', 'handed_back', 'abandoned', 'failed', 'cancelled')),
  plan TEXT NOT NULL,
  size_class TEXT NOT NULL,
  hardware TEXT NOT NULL,
  dedicated INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  lease_deadline INTEGER NOT NULL,
  ended_at INTEGER,
  streamed INTEGER NOT NULL DEFAULT 0,
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  generated_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(job_id, attempt));
CREATE INDEX IF NOT EXISTS attempts_node ON attempts(node_id, state);
CREATE UNIQUE INDEX IF NOT EXISTS attempts_one_live ON attempts(job_id) WHERE state IN ('assigned', 'running');
CREATE TABLE IF NOT EXISTS outputs(
  job_id TEXT NOT NULL REFERENCES jobs(id),
  idx INTEGER NOT NULL,
  text TEXT NOT NULL,
  tokens TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL,
  PRIMARY KEY(job_id, idx));
)sql";

// What version 3 added: a job's kind (a client's, or an audit of another job), what an audit
// job may not run on (a JSON list of owners), a node's ban, and each completed job's
// settlement with its audits (a failed first audit is confirmed by a second: `first_audit`);
// canaries (greedy requests with known answers) and what they measured: when an attempt was
// fetched, the speed placement predicted for it, and the node's measured share of it. The jobs completed
// before the upgrade are pending with the window closed: paid at the next sweep unless the
// ledger holds them already.
constexpr const char* kVerification = R"sql(
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'client';
ALTER TABLE jobs ADD COLUMN audit_of TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN exclude_owners TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN model_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN banned TEXT NOT NULL DEFAULT '';
CREATE TABLE settlements(
  job_id TEXT PRIMARY KEY REFERENCES jobs(id),
  node_id TEXT NOT NULL REFERENCES nodes(id),
  due_at INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('pending', 'paid', 'forfeited')),
  audit TEXT NOT NULL DEFAULT '' CHECK(audit IN ('', 'running', 'confirming', 'passed', 'failed', 'inconclusive')),
  audit_job TEXT NOT NULL DEFAULT '',
  first_audit TEXT NOT NULL DEFAULT '',
  note TEXT NOT NULL DEFAULT '',
  settled_at INTEGER);
CREATE INDEX settlements_due ON settlements(state, due_at);
CREATE INDEX settlements_node ON settlements(node_id, state);
ALTER TABLE jobs ADD COLUMN only_node TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN fetched_at INTEGER;
ALTER TABLE attempts ADD COLUMN predicted_tps REAL NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN speed_ratio REAL;
ALTER TABLE nodes ADD COLUMN measured_gbs REAL;
CREATE TABLE canaries(
  id TEXT PRIMARY KEY,
  model TEXT NOT NULL,
  model_sha256 TEXT NOT NULL,
  request TEXT NOT NULL,
  tokens TEXT NOT NULL,
  margins TEXT NOT NULL,
  created_at INTEGER NOT NULL);
INSERT INTO settlements(job_id, node_id, due_at, state)
  SELECT a.job_id, a.node_id, 0, 'pending' FROM attempts a JOIN jobs j ON j.id = a.job_id
  WHERE a.state = 'done' AND j.state = 'done';
)sql";

// What version 4 added: every write that changes what placement sees of a node (its row, its
// live attempts, an audit of its work being confirmed) sets its `seq` above every other, so a
// coordinator's placement index reads only the rows changed since it last looked.
constexpr const char* kNodeSeq = R"sql(
ALTER TABLE nodes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX nodes_seq ON nodes(seq);
)sql";

// What version 5 added: the memory challenge a node has yet to answer (JSON,
// protocol/memory_proof.h; '' when none is pending) and the bytes it last proved.
constexpr const char* kMemoryProofs = R"sql(
ALTER TABLE nodes ADD COLUMN memory_challenge TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN memory_proven INTEGER NOT NULL DEFAULT 0;
)sql";

// What version 6 added: a change to a node's live attempts (a placement, an attempt ending) is
// appended here instead of rewriting the node's row for a new `seq`. Rewriting rows scattered
// over a network's worth of nodes dirtied two random pages per node (its row, its place in
// nodes_seq) — at 100,000 nodes half of each placement's time and most of its commit — where
// appending writes one or two pages per batch. Rows are numbered in write order (one number
// per write, shared by the rows it adds) and pruned after a window; `below` is the highest
// number pruned, so an index that looked last before it reads every node again.
// (StoreOptions::change_window_ms)
constexpr const char* kNodeChanges = R"sql(
CREATE TABLE node_changes(seq INTEGER NOT NULL, node_id TEXT NOT NULL);
CREATE INDEX node_changes_seq ON node_changes(seq);
CREATE TABLE node_changes_pruned(below INTEGER NOT NULL);
INSERT INTO node_changes_pruned(below) VALUES(0);
)sql";

// What version 7 changed: attempts without foreign keys to jobs and nodes. Nothing deletes a job
// or a node, and every attempt is written in the transaction that read its job and its node; on
// PostgreSQL the two checks (a key-share lock on each row) were most of a placement batch's
// INSERT (1.1-1.2 of 1.6 ms for 16 attempts) — measured alternating at 20,000 nodes, batch 16:
// 2,101-2,490 placements/s with them, 2,785-3,447 without. Neither SQL has DROP CONSTRAINT in
// common, so the table is rebuilt.
constexpr const char* kAttemptsWithoutForeignKeys = R"sql(
CREATE TABLE attempts_v7(
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('assigned', 'running', 'done', 'handed_back', 'abandoned', 'failed', 'cancelled')),
  plan TEXT NOT NULL,
  size_class TEXT NOT NULL,
  hardware TEXT NOT NULL,
  dedicated INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  lease_deadline INTEGER NOT NULL,
  ended_at INTEGER,
  streamed INTEGER NOT NULL DEFAULT 0,
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  generated_tokens INTEGER NOT NULL DEFAULT 0,
  fetched_at INTEGER,
  predicted_tps REAL NOT NULL DEFAULT 0,
  PRIMARY KEY(job_id, attempt));
INSERT INTO attempts_v7(job_id, attempt, node_id, state, plan, size_class, hardware, dedicated, started_at,
  lease_deadline, ended_at, streamed, prompt_tokens, generated_tokens, fetched_at, predicted_tps)
  SELECT job_id, attempt, node_id, state, plan, size_class, hardware, dedicated, started_at, lease_deadline,
  ended_at, streamed, prompt_tokens, generated_tokens, fetched_at, predicted_tps FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v7 RENAME TO attempts;
CREATE INDEX attempts_node ON attempts(node_id, state);
CREATE UNIQUE INDEX attempts_one_live ON attempts(job_id) WHERE state IN ('assigned', 'running');
)sql";

// What version 8 changed: the queue's index holds the queued jobs alone, in the order placement
// takes them. Indexed by (state, queued_at), every job placed got a second index entry (its new
// state), so no jobs UPDATE was cheap, and the queued ones were read through the dead entries
// of those placed since the last vacuum, then sorted by id. A ban's cancelling of the audits of
// the banned node's work, which that index served by state, has one of its own (audit jobs only,
// so a client's job costs it nothing).
constexpr const char* kQueuedOnly = R"sql(
DROP INDEX jobs_queue;
CREATE INDEX jobs_queued ON jobs(queued_at, id) WHERE state = 'queued';
CREATE INDEX jobs_audits ON jobs(audit_of) WHERE kind = 'audit';
)sql";

const std::string& schema_v8() {
  static const std::string s = std::string(kJobsSchema) + kVerification + kNodeSeq + kMemoryProofs + kNodeChanges +
                               kAttemptsWithoutForeignKeys + kQueuedOnly;
  return s;
}

// What placement reads of a node, as NodeView fields (read_view below).
constexpr const char* kViewColumns =
    "id, seq, info, last_heartbeat, reliability, draining, "
    "(SELECT count(*) FROM attempts a WHERE a.node_id = nodes.id AND a.state IN ('assigned', 'running')), banned, "
    "(SELECT count(*) FROM settlements s WHERE s.node_id = nodes.id AND s.audit = 'confirming'), speed_ratio, measured_gbs, "
    "CASE WHEN memory_challenge = '' THEN 0 ELSE 1 END";

JobState parse_job_state(const std::string& s) {
  for (JobState st :
       {JobState::Queued, JobState::Assigned, JobState::Running, JobState::Done, JobState::Failed, JobState::Cancelled})
    if (s == to_string(st)) return st;
  throw Error("job store: unknown job state '" + s + "'");
}

// A node description the store wrote itself (register_node validated it).
NodeInfo stored_node(const std::string& text, const std::string& where) {
  try {
    return node_info_from_json(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": a stored node description is not JSON: " + e.what());
  }
}


}  // namespace

std::string new_job_id() {
  // The time first (milliseconds, 12 hex digits), then 64 random bits: ids sort by submission,
  // so a batch's jobs, attempts and ledger entries share the last pages of their indexes
  // instead of dirtying one page each at random.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  char time[16];
  std::snprintf(time, sizeof time, "%012llx", static_cast<unsigned long long>(ms.count()) & 0xffffffffffffULL);
  return "job-" + std::string(time) + protocol::random_hex(8);
}

const char* to_string(JobState s) {
  switch (s) {
    case JobState::Queued: return "queued";
    case JobState::Assigned: return "assigned";
    case JobState::Running: return "running";
    case JobState::Done: return "done";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
  }
  return "?";
}

const char* to_string(SettlementState s) {
  switch (s) {
    case SettlementState::Pending: return "pending";
    case SettlementState::Paid: return "paid";
    case SettlementState::Forfeited: return "forfeited";
  }
  return "?";
}

const char* to_string(AttemptState s) {
  switch (s) {
    case AttemptState::Assigned: return "assigned";
    case AttemptState::Running: return "running";
    case AttemptState::Done: return "done";
    case AttemptState::HandedBack: return "handed_back";
    case AttemptState::Abandoned: return "abandoned";
    case AttemptState::Failed: return "failed";
    case AttemptState::Cancelled: return "cancelled";
  }
  return "?";
}

JobStore JobStore::open(const std::string& location, const StoreOptions& options) {
  if (options.lease_ms <= 0 || options.heartbeat_timeout_ms <= 0 || options.max_attempts < 1 ||
      options.queue_timeout_ms <= 0 || options.assign_batch < 1 || options.audit_window_ms < 0 ||
      options.change_window_ms <= 0 || !(options.abandon_factor >= 0 && options.abandon_factor < 1))
    throw Error(location + ": job store options out of range (positive times and counts, abandon_factor in [0, 1))");
  sql::FileKind kind{"job store", kJobsFormat, kJobsVersion, schema_v8().c_str()};
  static constexpr sql::FileKind::Upgrade kUpgrades[] = {
      {"2", kVerification}, {"3", kNodeSeq}, {"4", kMemoryProofs}, {"5", kNodeChanges}, {"6", kAttemptsWithoutForeignKeys},
      {"7", kQueuedOnly}};
  kind.upgrades = kUpgrades;
  auto db = sql::open_database(location, kind);
  if (!options.wait_for_disk) db->set_wait_for_disk(false);
  return JobStore(std::move(db), options);
}

std::optional<protocol::MemoryChallenge> JobStore::register_node(const NodeInfo& info, int64_t now_ms,
                                                                 const std::string& public_key_hex,
                                                                 const std::optional<MemoryDemand>& memory) {
  // Validate by round trip: what is stored is what placement will read back.
  const NodeInfo checked = node_info_from_json(to_json(info));
  std::string banned_now;  // set when this registration banned the node: thrown once the ban is written
  auto challenge = db().write([&]() -> std::optional<protocol::MemoryChallenge> {
      // Two agents on one key (one identity) under different owners: the second would take the
      // first's place and its jobs' credits. While the first is alive it is refused; once it
      // fell silent the key's new owner may take over.
      sql::Stmt old(db(), "SELECT owner, last_heartbeat, banned FROM nodes WHERE id = ?1");
      old.bind(1, checked.id);
      const bool known = old.step();
      if (known && !old.text(2).empty())
        throw Banned(where() + ": node '" + checked.id + "' was caught by an audit and gets no more work: " + old.text(2));
      if (known && old.text(0) != checked.owner && now_ms - old.i64(1) <= options_.heartbeat_timeout_ms)
        throw Error(where() + ": node '" + checked.id + "' is registered to owner '" + old.text(0) +
                    "' and alive (its last heartbeat " + std::to_string(now_ms - old.i64(1)) +
                    " ms ago); another agent on the same key cannot register it for '" + checked.owner +
                    "': give each agent its own key (orchard node --key)");
      if (memory && known) {
        const auto pending = pending_memory_check_in(checked.id);
        if (pending && pending->committed()) {
          banned_now = "memory check: registered again instead of opening the probes of the fill it committed to";
          ban_in(checked.id, banned_now, now_ms);
          return std::nullopt;
        }
      }
      sql::Stmt s(db(),
                  "INSERT INTO nodes(id, owner, info, registered_at, last_heartbeat, draining, public_key, seq) "
                  "VALUES(?1, ?2, ?3, ?4, ?4, ?5, ?6, (SELECT coalesce(max(seq), 0) + 1 FROM nodes)) "
                  "ON CONFLICT(id) DO UPDATE SET owner = excluded.owner, info = excluded.info, seq = excluded.seq, "
                  "last_heartbeat = excluded.last_heartbeat, draining = excluded.draining, "
                  // What a canary measured held for the machines described then: measured again.
                  "speed_ratio = NULL, measured_gbs = NULL, "
                  "public_key = CASE WHEN excluded.public_key = '' THEN nodes.public_key ELSE excluded.public_key END");
      s.bind(1, checked.id).bind(2, checked.owner).bind(3, to_json(checked).dump()).bind(4, now_ms);
      s.bind(5, int64_t{checked.state.status == NodeStatus::Draining}).bind(6, public_key_hex);
      s.step();
      return memory ? challenge_memory_in(checked.id, *memory, now_ms) : std::nullopt;
  });
  if (!banned_now.empty()) throw banned(checked.id, banned_now);
  return challenge;
}

std::optional<std::string> JobStore::node_key(const std::string& node_id) {
  sql::Stmt s(db(), "SELECT public_key FROM nodes WHERE id = ?1");
  s.bind(1, node_id);
  if (!s.step() || s.text(0).empty()) return std::nullopt;
  return s.text(0);
}

void JobStore::heartbeat(const std::string& node_id, const HeartbeatState& state, int64_t now_ms) {
  db().write([&] { heartbeat_in(node_id, state, now_ms); });
}

void JobStore::heartbeat_in(const std::string& node_id, const HeartbeatState& state, int64_t now_ms) {
  sql::Stmt get(db(), "SELECT info FROM nodes WHERE id = ?1");
  get.bind(1, node_id);
  if (!get.step()) throw Error(where() + ": heartbeat from unknown node '" + node_id + "' (register it first)");
  NodeInfo info = stored_node(get.text(0), where());
  info.state = state;
  info.state.running.reset();  // the lease renewal below uses it; the description keeps load and status
  sql::Stmt up(db(), std::string("UPDATE nodes SET info = ?2, last_heartbeat = ?3, draining = ?4, ") + kNextSeq +
                         " WHERE id = ?1");
  up.bind(1, node_id).bind(2, to_json(info).dump()).bind(3, now_ms).bind(4, int64_t{state.status == NodeStatus::Draining});
  up.step();
  const int64_t deadline = now_ms + options_.lease_ms;
  // An attempt not fetched yet is waiting on the node's next poll, which a live node makes.
  sql::Stmt waiting(db(), "UPDATE attempts SET lease_deadline = ?2 WHERE node_id = ?1 AND state = 'assigned'");
  waiting.bind(1, node_id).bind(2, deadline).step();
  if (!state.running) {
    sql::Stmt all(db(), "UPDATE attempts SET lease_deadline = ?2 WHERE node_id = ?1 AND state = 'running'");
    all.bind(1, node_id).bind(2, deadline).step();
  } else {
    for (const std::string& job : *state.running) {
      sql::Stmt one(db(), "UPDATE attempts SET lease_deadline = ?3 WHERE node_id = ?1 AND job_id = ?2 AND state = 'running'");
      one.bind(1, node_id).bind(2, job).bind(3, deadline).step();
    }
  }
}

std::string JobStore::submit(const JobRequest& job, int64_t now_ms, bool* created) {
  const std::string where = this->where() + ": submitting job '" + job.id + "': ";
  if (job.client.empty()) throw Error(where + "no client account");
  if (job.model.empty()) throw Error(where + "no model");
  if (job.max_tokens < 1 || job.n_ctx < 1 || job.max_tokens > job.n_ctx || job.prompt_tokens < 0)
    throw Error(where + "max_tokens " + std::to_string(job.max_tokens) + " and context " + std::to_string(job.n_ctx) +
                " must be positive with max_tokens ≤ context");
  const std::string id = job.id.empty() ? new_job_id() : job.id;
  const std::string request = job.request.dump();
  const int64_t prompt = job.prompt_tokens > 0 ? job.prompt_tokens : std::max<int64_t>(1, job.n_ctx - job.max_tokens);
  const bool stored = db().write([&] {
    sql::Stmt old(db(), "SELECT client, model, request FROM jobs WHERE id = ?1");
    old.bind(1, id);
    if (old.step()) {
      if (old.text(0) != job.client || old.text(1) != job.model || old.text(2) != request)
        throw Error(where + "the id is taken by a different job");
      return false;
    }
    sql::Stmt ins(db(),
                  "INSERT INTO jobs(id, client, model, request, n_ctx, prompt_tokens, max_tokens, state, created_at, "
                  "queued_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?8)");
    ins.bind(1, id).bind(2, job.client).bind(3, job.model).bind(4, request).bind(5, job.n_ctx).bind(6, prompt);
    ins.bind(7, job.max_tokens).bind(8, now_ms).step();
    return true;
  });
  if (created) *created = stored;
  return id;
}

JobStatus JobStore::job(const std::string& job_id) {
  // One read transaction: the status and the output are one moment's.
  return db().read([&] { return job_in(job_id); });
}

JobStatus JobStore::job_in(const std::string& job_id) {
  sql::Stmt s(db(),
              "SELECT client, model, state, error, waiting, created_at, usage_prompt, usage_generated, finish_reason, "
              "(SELECT count(*) FROM attempts WHERE job_id = ?1), "
              "(SELECT node_id FROM attempts WHERE job_id = ?1 ORDER BY attempt DESC LIMIT 1) FROM jobs WHERE id = ?1");
  s.bind(1, job_id);
  if (!s.step()) throw Error(where() + ": no job '" + job_id + "'");
  JobStatus st;
  st.id = job_id;
  st.client = s.text(0);
  st.model = s.text(1);
  st.state = parse_job_state(s.text(2));
  st.error = s.text(3);
  st.waiting = s.text(4);
  st.created_ms = s.i64(5);
  if (!s.null(6)) st.usage = Usage{s.i64(6), s.i64(7), s.text(8)};
  st.attempts = s.i64(9);
  st.node_id = s.text(10);
  st.output = output_of(job_id);
  return st;
}

NodeStats JobStore::node_stats(const std::string& node_id) {
  sql::Stmt s(db(),
              "SELECT owner, reliability, draining, last_heartbeat, "
              "(SELECT count(*) FROM attempts WHERE node_id = ?1 AND state = 'done'), "
              "(SELECT coalesce(sum(generated_tokens), 0) FROM attempts WHERE node_id = ?1 AND state = 'done'), "
              "(SELECT coalesce(sum(streamed), 0) FROM attempts WHERE node_id = ?1), "
              "(SELECT count(*) FROM attempts WHERE node_id = ?1 AND state = 'abandoned'), "
              "(SELECT count(*) FROM attempts WHERE node_id = ?1 AND state = 'handed_back'), "
              "(SELECT count(*) FROM attempts WHERE node_id = ?1 AND state IN ('assigned', 'running')), banned, "
              "(SELECT count(*) FROM settlements WHERE node_id = ?1 AND audit = 'passed'), "
              "(SELECT count(*) FROM settlements WHERE node_id = ?1 AND audit = 'failed'), "
              "(SELECT count(*) FROM settlements WHERE node_id = ?1 AND state = 'pending'), "
              "memory_proven, CASE WHEN memory_challenge = '' THEN 0 ELSE 1 END "
              "FROM nodes WHERE id = ?1");
  s.bind(1, node_id);
  if (!s.step()) throw Error(where() + ": no node '" + node_id + "'");
  NodeStats n;
  n.node_id = node_id;
  n.owner = s.text(0);
  n.reliability = s.f64(1);
  n.draining = s.i64(2) != 0;
  n.last_heartbeat_ms = s.i64(3);
  n.jobs_served = s.i64(4);
  n.tokens_generated = s.i64(5);
  n.tokens_streamed = s.i64(6);
  n.abandoned = s.i64(7);
  n.handed_back = s.i64(8);
  n.active_jobs = s.i64(9);
  n.banned = s.text(10);
  n.audits_passed = s.i64(11);
  n.audits_failed = s.i64(12);
  n.pending_jobs = s.i64(13);
  n.memory_proven = s.i64(14);
  n.memory_check_pending = s.i64(15) != 0;
  return n;
}

NodeView JobStore::read_view(sql::Stmt& s, bool parse_info) {
  NodeView v;
  if (parse_info) v.info = stored_node(s.text(2), where());
  v.info.id = s.text(0);
  v.last_heartbeat_ms = s.i64(3);
  v.reliability = s.f64(4);
  v.draining = s.i64(5) != 0;
  v.active_jobs = static_cast<int>(s.i64(6));
  v.banned = s.text(7);
  v.under_review = s.i64(8) > 0;
  if (!s.null(9)) v.speed_ratio = s.f64(9);
  if (!s.null(10)) v.measured_gbs = s.f64(10);
  v.proving_memory = s.i64(11) != 0;
  return v;
}

std::vector<NodeView> JobStore::nodes() {
  sql::Stmt s(db(), std::string("SELECT ") + kViewColumns + " FROM nodes ORDER BY id");
  std::vector<NodeView> out;
  while (s.step()) out.push_back(read_view(s));
  return out;
}

JobStore::JobStore(std::unique_ptr<sql::Connection> db, const StoreOptions& o) : db_(std::move(db)), options_(o) {
  db_->on_rollback = [index = index_] {
    const int64_t read = index->rows_read;
    *index = IndexState{};
    index->rows_read = read;
  };
}

NodeIndex& JobStore::index_in() {
  IndexState& ix = *index_;
  // The index counted its own last placements: past their log entry if nothing came between.
  // (Not answered yet, inside the same transaction: the reads below take those nodes again.)
  if (ix.counted) {
    if (ix.counted->answered() && ix.counted->step() && ix.change_seq == ix.counted->i64(0) - 1)
      ix.change_seq = ix.counted->i64(0);
    ix.counted.reset();
  }
  // Three reads in one round trip (with what was sent before them): the change log's top
  // first, so the rows read after it are at least that new and a change logged while they are
  // read is read again next time, not skipped; then the nodes logged since the last look, and
  // the rows written since (only those: the same description text skips re-planning).
  sql::Stmt top(db(), "SELECT coalesce((SELECT max(seq) FROM node_changes), 0), (SELECT below FROM node_changes_pruned)");
  top.send();
  // On PostgreSQL as a list of ids, not a join: a placement plans it once (plan_once), not
  // knowing how few rows `seq > ?1` picks, and as a join that plan hashed every node.
  sql::Stmt changed(db(), std::string("SELECT ") + kViewColumns + " FROM nodes WHERE id " +
                              (db().dialect() == sql::Dialect::PostgreSQL
                                   ? "= ANY(ARRAY(SELECT node_id FROM node_changes WHERE seq > ?1))"
                                   : "IN (SELECT node_id FROM node_changes WHERE seq > ?1)"));
  if (ix.seq >= 0) changed.bind(1, ix.change_seq).send();
  const std::string written_since = std::string("SELECT ") + kViewColumns + " FROM nodes WHERE seq > ?1";
  sql::Stmt written(db(), written_since);
  written.bind(1, ix.seq).send();
  top.step();
  const int64_t changes_top = top.i64(0), pruned_below = top.i64(1);
  auto read = [&](sql::Stmt& s, bool by_seq) {
    while (s.step()) {
      ++ix.rows_read;
      if (by_seq) ix.seq = std::max(ix.seq, s.i64(1));
      std::string text = s.text(2);
      const std::string* known = ix.nodes.info_text(s.text(0));
      ix.nodes.update(read_view(s, !known || *known != text), text);
    }
  };
  const bool pruned = ix.seq >= 0 && ix.change_seq < pruned_below;
  if (ix.seq >= 0 && !pruned) read(changed, false);
  ix.change_seq = changes_top;
  if (!pruned) {
    read(written, true);
    return ix.nodes;
  }
  // The changes since the last look were pruned: every node again.
  ix.seq = -1;
  sql::Stmt all(db(), written_since);
  all.bind(1, ix.seq);
  read(all, true);
  return ix.nodes;
}

void JobStore::nodes_changed_in(const std::vector<std::string>& node_ids, bool counted) {
  if (node_ids.empty()) return;
  // One statement: the number taken and the rows logged under it together. Nothing here waits
  // for its answer, so a placement's writes and its COMMIT go in one round trip.
  std::string sql = std::string("INSERT INTO node_changes(seq, node_id) SELECT ") + kNextChange + ", column1 FROM (VALUES";
  for (size_t i = 0; i < node_ids.size(); ++i) sql += std::string(i ? ", " : " ") + "(?" + std::to_string(i + 1) + ")";
  sql += ") AS logged RETURNING seq";
  auto s = std::make_unique<sql::Stmt>(db(), sql);
  for (size_t i = 0; i < node_ids.size(); ++i) s->bind(static_cast<int>(i) + 1, node_ids[i]);
  s->send();
  if (counted) index_->counted = std::move(s);
  prune_changes_in();
}

void JobStore::touch_node_in(const std::string& node_id) { nodes_changed_in({node_id}); }

std::string JobStore::log_live_nodes_sql(const std::string& attempts_where) {
  return std::string("INSERT INTO node_changes(seq, node_id) SELECT ") + kNextChange +
         ", node_id FROM attempts WHERE state IN ('assigned', 'running') AND " + attempts_where;
}

void JobStore::touch_job_nodes_in(const std::string& job_id) {
  sql::Stmt s(db(), log_live_nodes_sql("job_id = ?1"));
  s.bind(1, job_id).step();
  prune_changes_in();
}

void JobStore::prune_changes_in() {
  // Now and then (a second, or a quarter of the window when shorter) note the log's top, and
  // drop what was logged before the note taken a window ago.
  const auto now = std::chrono::steady_clock::now();
  const auto window = std::chrono::milliseconds(options_.change_window_ms);
  if (!change_marks_.empty() && now - change_marks_.back().first < std::min<std::chrono::nanoseconds>(window / 4, std::chrono::seconds(1)))
    return;
  sql::Stmt top(db(), "SELECT coalesce(max(seq), 0) FROM node_changes");
  top.step();
  change_marks_.emplace_back(now, top.i64(0));
  int64_t horizon = -1;
  while (change_marks_.size() > 1 && now - change_marks_.front().first > window) {
    horizon = change_marks_.front().second;
    change_marks_.pop_front();
  }
  if (horizon <= 0) return;
  sql::Stmt mark(db(), "UPDATE node_changes_pruned SET below = ?1 WHERE below < ?1");
  mark.bind(1, horizon).step();
  sql::Stmt drop(db(), "DELETE FROM node_changes WHERE seq <= ?1");
  drop.bind(1, horizon).step();
}

void JobStore::warm_index() {
  db().read([&] { index_in(); });
}

std::map<JobState, int64_t> JobStore::job_counts() {
  sql::Stmt s(db(), "SELECT state, count(*) FROM jobs GROUP BY state");
  std::map<JobState, int64_t> out;
  while (s.step()) out[parse_job_state(s.text(0))] = s.i64(1);
  return out;
}

}  // namespace orchard::network
