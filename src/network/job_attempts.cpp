// Claims, leases and output: the job store's operations on attempts. Each public operation is
// one write transaction (database.h), so a check ("is this attempt live and yours?") and the
// write it allows see one state even with several coordinators on the database.
#include <algorithm>
#include <cstdlib>

#include "network/billed_usage.h"
#include "network/job_store.h"

namespace orchard::network {

struct JobStore::Attempt {
  std::string node_id;
  std::string state;
  int64_t lease_deadline = 0;
  std::string size_class, hardware;
  bool dedicated = false;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  bool live() const { return state == "assigned" || state == "running"; }
};

namespace {

std::string attempt_name(const std::string& job_id, int64_t attempt) {
  return "job '" + job_id + "' attempt " + std::to_string(attempt);
}

// Refuses a node's report on an attempt that is over or whose lease ran out (even before
// expire() noticed: the lease is the promise, not the sweep).
void check_live(const std::string& where, const std::string& state, int64_t lease_deadline, int64_t now_ms) {
  if (state != "assigned" && state != "running") throw NotYourJob(where + ": the attempt is " + state + ", not yours to run any more");
  if (now_ms > lease_deadline)
    throw NotYourJob(where + ": its lease ran out " + std::to_string(now_ms - lease_deadline) +
                     " ms ago (heartbeat more often than the lease)");
}

// A chunk's token ids as stored: decimal, space-separated ("" for none).
std::string format_tokens(const std::vector<int32_t>& tokens) {
  std::string out;
  for (int32_t t : tokens) {
    if (!out.empty()) out += ' ';
    out += std::to_string(t);
  }
  return out;
}

std::vector<int32_t> parse_tokens(const std::string& text) {
  std::vector<int32_t> out;
  const char* p = text.c_str();
  for (char* end = nullptr;; p = end) {
    const long v = std::strtol(p, &end, 10);
    if (end == p) break;
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

}  // namespace

std::vector<std::string> JobStore::output_of(const std::string& job_id, std::vector<std::vector<int32_t>>* tokens) {
  sql::Stmt s(db(), "SELECT text, tokens FROM outputs WHERE job_id = ?1 ORDER BY idx");
  s.bind(1, job_id);
  std::vector<std::string> out;
  while (s.step()) {
    out.push_back(s.text(0));
    if (tokens) tokens->push_back(parse_tokens(s.text(1)));
  }
  return out;
}

JobStore::Attempt JobStore::attempt_of(const std::string& job_id, int64_t attempt, const std::string& node_id,
                                       const char* doing) {
  const std::string where = this->where() + ": node '" + node_id + "' " + doing + " " + attempt_name(job_id, attempt);
  sql::Stmt s(db(),
              "SELECT node_id, state, lease_deadline, size_class, hardware, dedicated, prompt_tokens, generated_tokens "
              "FROM attempts WHERE job_id = ?1 AND attempt = ?2");
  s.bind(1, job_id).bind(2, attempt);
  if (!s.step()) throw NotYourJob(where + ": no such attempt");
  // Same message whoever holds it: a node learns nothing about other nodes' work.
  if (s.text(0) != node_id) throw NotYourJob(where + ": not your job (another node holds this attempt)");
  return Attempt{s.text(0), s.text(1), s.i64(2), s.text(3), s.text(4), s.i64(5) != 0, s.i64(6), s.i64(7)};
}

void JobStore::fail_job(const std::string& job_id, const std::string& error, int64_t now_ms) {
  sql::Stmt s(db(), "UPDATE jobs SET state = 'failed', error = ?2, waiting = '', finished_at = ?3 WHERE id = ?1");
  s.bind(1, job_id).bind(2, error).bind(3, now_ms).step();
}

std::vector<std::string> JobStore::nodes_with_assigned_work() {
  // The condition is the live-attempt index's own (attempts_one_live), so the database reads
  // the few live attempts, not the table.
  sql::Stmt s(db(), "SELECT node_id, state FROM attempts WHERE state IN ('assigned', 'running')");
  std::vector<std::string> out;
  while (s.step())
    if (s.text(1) == "assigned") out.push_back(s.text(0));
  return out;
}

bool JobStore::has_queued() {
  sql::Stmt s(db(), "SELECT 1 FROM jobs WHERE state = 'queued' LIMIT 1");
  return s.step();
}

std::optional<Work> JobStore::next_job_for(const std::string& node_id, int64_t now_ms) {
  // Most polls find nothing: on their own they are one statement (the sign of life, returning
  // whether there is anything to look at), not a transaction of six — which is what a database
  // a network away pays per poll. A poll with something to take does it all in one transaction.
  if (!db().in_transaction() && !poll_alive(node_id, now_ms, true)) return std::nullopt;
  return db().write([&] { return next_job_in(node_id, now_ms); });
}

bool JobStore::poll_alive(const std::string& node_id, int64_t now_ms, bool look) {
  // A poll is a sign of life. Placement's copy of the node (the index) is refreshed only when
  // the time it holds is a quarter of the heartbeat timeout old: ten thousand nodes polling
  // would otherwise have every placement re-read hundreds of rows, and a copy at most that old
  // still counts a node polling every half timeout as alive.
  sql::Stmt alive(db(), std::string("UPDATE nodes SET last_heartbeat = ?2, seq = CASE WHEN ?2 - last_heartbeat >= ?3 THEN ") +
                            kNextSeqValue + " ELSE seq END WHERE id = ?1 RETURNING banned, " +
                            (look ? "CASE WHEN EXISTS (SELECT 1 FROM attempts WHERE node_id = ?1 AND state = 'assigned') "
                                    "OR EXISTS (SELECT 1 FROM jobs WHERE state = 'queued') THEN 1 ELSE 0 END"
                                  : "0"));
  alive.bind(1, node_id).bind(2, now_ms).bind(3, options_.heartbeat_timeout_ms / 4);
  if (!alive.step()) throw Error(where() + ": poll from unknown node '" + node_id + "' (register it first)");
  if (!alive.text(0).empty()) throw banned(node_id, alive.text(0));
  return alive.i64(1) != 0;
}

std::optional<Work> JobStore::next_job_in(const std::string& node_id, int64_t now_ms) {
  poll_alive(node_id, now_ms, false);
  auto pick = [&]() -> std::optional<Work> {
    sql::Stmt s(db(),
                "SELECT a.job_id, a.attempt, a.plan, j.model, j.request, j.n_ctx, j.max_tokens FROM attempts a "
                "JOIN jobs j ON j.id = a.job_id WHERE a.node_id = ?1 AND a.state = 'assigned' "
                "ORDER BY a.started_at, a.job_id LIMIT 1");
    s.bind(1, node_id);
    if (!s.step()) return std::nullopt;
    Work w;
    w.job_id = s.text(0);
    w.attempt = s.i64(1);
    w.plan = s.text(2);
    w.model = s.text(3);
    w.request = nlohmann::json::parse(s.text(4));
    w.n_ctx = s.i64(5);
    w.max_tokens = s.i64(6);
    return w;
  };
  std::optional<Work> w = pick();
  if (!w && !assign_queued_in(now_ms).empty()) w = pick();
  if (w) {
    w->lease_deadline_ms = now_ms + options_.lease_ms;
    sql::Stmt a(db(),
                "UPDATE attempts SET state = 'running', lease_deadline = ?3, fetched_at = coalesce(fetched_at, ?4) "
                "WHERE job_id = ?1 AND attempt = ?2");
    a.bind(1, w->job_id).bind(2, w->attempt).bind(3, w->lease_deadline_ms).bind(4, now_ms).step();
    sql::Stmt j(db(), "UPDATE jobs SET state = 'running' WHERE id = ?1");
    j.bind(1, w->job_id).step();
    w->output = output_of(w->job_id, &w->output_tokens);
  }
  return w;
}

bool JobStore::append_output(const std::string& job_id, int64_t attempt, const std::string& node_id, int64_t index,
                             const std::string& text, int64_t now_ms, const std::vector<int32_t>& tokens) {
  const std::string where = this->where() + ": " + attempt_name(job_id, attempt) + ", token " + std::to_string(index);
  return db().write([&] {
    const Attempt a = attempt_of(job_id, attempt, node_id, "streaming into");
    check_live(where, a.state, a.lease_deadline, now_ms);
    sql::Stmt job(db(), "SELECT max_tokens FROM jobs WHERE id = ?1");
    job.bind(1, job_id).step();
    if (index < 0 || index >= job.i64(0))
      throw Error(where + ": index out of range (the job asked for " + std::to_string(job.i64(0)) + " tokens)");
    bool stored = false;
    const std::string token_text = format_tokens(tokens);
    sql::Stmt old(db(), "SELECT text, tokens FROM outputs WHERE job_id = ?1 AND idx = ?2");
    old.bind(1, job_id).bind(2, index);
    if (old.step()) {
      // A retried append (the reply was lost) repeats itself exactly; anything else is a bug.
      if (old.text(0) != text || old.text(1) != token_text) throw Error(where + ": already holds a different chunk");
    } else {
      sql::Stmt next(db(), "SELECT coalesce(max(idx) + 1, 0) FROM outputs WHERE job_id = ?1");
      next.bind(1, job_id).step();
      if (index != next.i64(0)) throw Error(where + ": out of order (the next token is " + std::to_string(next.i64(0)) + ")");
      sql::Stmt ins(db(), "INSERT INTO outputs(job_id, idx, text, tokens, attempt) VALUES(?1, ?2, ?3, ?4, ?5)");
      ins.bind(1, job_id).bind(2, index).bind(3, text).bind(4, token_text).bind(5, attempt).step();
      stored = true;
    }
    // Streaming is a sign of life: it renews the lease like a heartbeat.
    sql::Stmt up(db(),
                 "UPDATE attempts SET streamed = streamed + ?3, state = 'running', lease_deadline = ?4 "
                 "WHERE job_id = ?1 AND attempt = ?2");
    up.bind(1, job_id).bind(2, attempt).bind(3, int64_t{stored}).bind(4, now_ms + options_.lease_ms).step();
    sql::Stmt run(db(), "UPDATE jobs SET state = 'running' WHERE id = ?1");
    run.bind(1, job_id).step();
    return stored;
  });
}

Completion JobStore::complete(const std::string& job_id, int64_t attempt, const std::string& node_id, const Usage& usage,
                              int64_t now_ms) {
  const std::string where = this->where() + ": completing " + attempt_name(job_id, attempt);
  if (usage.prompt_tokens < 0 || usage.generated_tokens < 0) throw Error(where + ": negative token counts");
  return db().write([&] {
    Attempt a = attempt_of(job_id, attempt, node_id, "completing");
    const bool first = a.state != "done";
    if (first) {
      check_live(where, a.state, a.lease_deadline, now_ms);
      check_not_banned(node_id);
      const Usage billed = billed_usage(job_id, usage);
      sql::Stmt at(db(),
                   "UPDATE attempts SET state = 'done', ended_at = ?3, prompt_tokens = ?4, generated_tokens = ?5 "
                   "WHERE job_id = ?1 AND attempt = ?2");
      at.bind(1, job_id).bind(2, attempt).bind(3, now_ms).bind(4, billed.prompt_tokens).bind(5, billed.generated_tokens).step();
      sql::Stmt job(db(),
                    "UPDATE jobs SET state = 'done', usage_prompt = ?2, usage_generated = ?3, finished_at = ?4, waiting = '', "
                    "finish_reason = ?5 WHERE id = ?1");
      job.bind(1, job_id).bind(2, billed.prompt_tokens).bind(3, billed.generated_tokens).bind(4, now_ms);
      job.bind(5, usage.finish_reason).step();
      // Reliability recovers slowly with finished work, so one old abandonment is not forever.
      sql::Stmt rel(db(), std::string("UPDATE nodes SET reliability = reliability + (1.0 - reliability) * ?2, ") + kNextSeq +
                              " WHERE id = ?1");
      rel.bind(1, node_id).bind(2, options_.recover_share).step();
      a.prompt_tokens = billed.prompt_tokens;
      a.generated_tokens = billed.generated_tokens;
      // Paid once the audit window closes and no audit of it runs (due_settlements).
      sql::Stmt settle(db(), "INSERT INTO settlements(job_id, node_id, due_at, state) VALUES(?1, ?2, ?3, 'pending')");
      settle.bind(1, job_id).bind(2, node_id).bind(3, now_ms + options_.audit_window_ms).step();
    }
    Completion c = completion_of(job_id, attempt, a);
    c.first = first;
    return c;
  });
}

Usage JobStore::billed_usage(const std::string& job_id, const Usage& reported) {
  // Every chunk of the job, this attempt's and the earlier ones' it continued after (the node
  // reports the job's whole output, as the client sees it). A chunk without token ids (a node
  // that sends none) counts as one token.
  int64_t relayed = 0;
  sql::Stmt out(db(), "SELECT tokens FROM outputs WHERE job_id = ?1");
  out.bind(1, job_id);
  while (out.step()) relayed += std::max<int64_t>(1, static_cast<int64_t>(parse_tokens(out.text(0)).size()));
  sql::Stmt req(db(), "SELECT request FROM jobs WHERE id = ?1");
  req.bind(1, job_id).step();
  // The coordinator stores {"api", "body"}; the body is what the client sent.
  const nlohmann::json request = nlohmann::json::parse(req.text(0), nullptr, false);
  const bool wrapped = request.is_object() && request.contains("body");
  Usage billed = reported;
  billed.generated_tokens = relayed;
  billed.prompt_tokens = std::min(reported.prompt_tokens, prompt_token_bound(wrapped ? request["body"] : request));
  return billed;
}

Completion JobStore::completion_of(const std::string& job_id, int64_t attempt, const Attempt& a) {
  sql::Stmt who(db(), "SELECT j.client, n.owner, j.kind FROM jobs j, nodes n WHERE j.id = ?1 AND n.id = ?2");
  who.bind(1, job_id).bind(2, a.node_id).step();
  Completion c;
  c.job_id = job_id;
  c.attempt = attempt;
  c.client = who.text(0);
  c.owner = who.text(1);
  c.kind = who.text(2);
  c.node_id = a.node_id;
  c.usage = JobUsage{static_cast<uint64_t>(a.prompt_tokens), static_cast<uint64_t>(a.generated_tokens),
                     parse_size_class(a.size_class), parse_hardware_class(a.hardware), a.dedicated};
  return c;
}

Completion JobStore::done_completion(const std::string& job_id) {
  sql::Stmt s(db(), "SELECT attempt, node_id FROM attempts WHERE job_id = ?1 AND state = 'done'");
  s.bind(1, job_id);
  if (!s.step()) throw Error(where() + ": job '" + job_id + "' has no completed attempt");
  const int64_t attempt = s.i64(0);
  return completion_of(job_id, attempt, attempt_of(job_id, attempt, s.text(1), "reading"));
}

std::vector<Completion> JobStore::completions() {
  return db().read([&] {
    std::vector<std::pair<std::string, int64_t>> done;
    {
      sql::Stmt s(db(),
                  "SELECT a.job_id, a.attempt FROM attempts a JOIN jobs j ON j.id = a.job_id "
                  "WHERE a.state = 'done' AND j.state = 'done' ORDER BY j.finished_at, a.job_id");
      while (s.step()) done.emplace_back(s.text(0), s.i64(1));
    }
    std::vector<Completion> out;
    for (const auto& [job, attempt] : done) {
      sql::Stmt s(db(), "SELECT node_id FROM attempts WHERE job_id = ?1 AND attempt = ?2");
      s.bind(1, job).bind(2, attempt).step();
      out.push_back(completion_of(job, attempt, attempt_of(job, attempt, s.text(0), "reading")));
    }
    return out;
  });
}

void JobStore::fail(const std::string& job_id, int64_t attempt, const std::string& node_id, const std::string& error,
                    int64_t now_ms) {
  const std::string where = this->where() + ": failing " + attempt_name(job_id, attempt);
  db().write([&] {
    const Attempt a = attempt_of(job_id, attempt, node_id, "failing");
    if (a.state == "failed") return;
    check_live(where, a.state, a.lease_deadline, now_ms);
    sql::Stmt at(db(), "UPDATE attempts SET state = 'failed', ended_at = ?3 WHERE job_id = ?1 AND attempt = ?2");
    at.bind(1, job_id).bind(2, attempt).bind(3, now_ms).step();
    touch_node_in(node_id);
    fail_job(job_id, "node '" + node_id + "' cannot run this job: " + error, now_ms);
  });
}

void JobStore::hand_back(const std::string& job_id, int64_t attempt, const std::string& node_id, int64_t now_ms) {
  db().write([&] {
    const Attempt a = attempt_of(job_id, attempt, node_id, "handing back");
    if (a.state == "handed_back") return;
    // Giving work up is allowed until expire() has abandoned the attempt, even just past the
    // lease: the node says so itself, which is what an owner's drain should look like.
    if (!a.live())
      throw NotYourJob(where() + ": node '" + node_id + "' handing back " + attempt_name(job_id, attempt) +
                       ": the attempt is " + a.state);
    sql::Stmt at(db(), "UPDATE attempts SET state = 'handed_back', ended_at = ?3 WHERE job_id = ?1 AND attempt = ?2");
    at.bind(1, job_id).bind(2, attempt).bind(3, now_ms).step();
    touch_node_in(node_id);
    sql::Stmt job(db(), "UPDATE jobs SET state = 'queued', queued_at = ?2 WHERE id = ?1");
    job.bind(1, job_id).bind(2, now_ms).step();
  });
}

bool JobStore::cancel(const std::string& job_id, int64_t now_ms) {
  return db().write([&] {
    sql::Stmt j(db(), "SELECT state FROM jobs WHERE id = ?1");
    j.bind(1, job_id);
    if (!j.step()) throw Error(where() + ": cancelling job '" + job_id + "': no such job");
    const std::string state = j.text(0);
    if (state == "done" || state == "failed" || state == "cancelled") return false;
    touch_job_nodes_in(job_id);
    sql::Stmt at(db(),
                 "UPDATE attempts SET state = 'cancelled', ended_at = ?2 WHERE job_id = ?1 AND state IN ('assigned', 'running')");
    at.bind(1, job_id).bind(2, now_ms).step();
    sql::Stmt up(db(), "UPDATE jobs SET state = 'cancelled', waiting = '', finished_at = ?2 WHERE id = ?1");
    up.bind(1, job_id).bind(2, now_ms).step();
    return true;
  });
}

ExpireReport JobStore::expire(int64_t now_ms) {
  return db().write([&] {
    ExpireReport report;
    struct Lost {
      std::string job_id, node_id, why;
      int64_t attempt;
    };
    std::vector<Lost> lost;
    {
      sql::Stmt s(db(),
                  "SELECT a.job_id, a.attempt, a.node_id, a.lease_deadline, n.last_heartbeat FROM attempts a "
                  "JOIN nodes n ON n.id = a.node_id WHERE a.state IN ('assigned', 'running') "
                  "AND (a.lease_deadline < ?1 OR n.last_heartbeat < ?2) ORDER BY a.job_id");
      s.bind(1, now_ms).bind(2, now_ms - options_.heartbeat_timeout_ms);
      while (s.step()) {
        const int64_t silent = now_ms - s.i64(4);
        const std::string why = silent > options_.heartbeat_timeout_ms
                                    ? "silent for " + std::to_string(silent) + " ms"
                                    : "lease ran out " + std::to_string(now_ms - s.i64(3)) + " ms ago";
        lost.push_back({s.text(0), s.text(2), why, s.i64(1)});
      }
    }
    for (const Lost& l : lost) {
      sql::Stmt at(db(), "UPDATE attempts SET state = 'abandoned', ended_at = ?3 WHERE job_id = ?1 AND attempt = ?2");
      at.bind(1, l.job_id).bind(2, l.attempt).bind(3, now_ms).step();
      sql::Stmt rel(db(), std::string("UPDATE nodes SET reliability = reliability * ?2, ") + kNextSeq + " WHERE id = ?1");
      rel.bind(1, l.node_id).bind(2, options_.abandon_factor).step();
      report.abandoned.emplace_back(l.job_id, l.attempt);
      sql::Stmt count(db(), "SELECT count(*) FROM attempts WHERE job_id = ?1 AND state = 'abandoned'");
      count.bind(1, l.job_id).step();
      if (count.i64(0) >= options_.max_attempts) {
        fail_job(l.job_id,
                 "abandoned " + std::to_string(count.i64(0)) + " times (the limit is " +
                     std::to_string(options_.max_attempts) + "); last by node '" + l.node_id + "', " + l.why,
                 now_ms);
        report.failed.push_back(l.job_id);
      } else {
        // Requeued with its output: the next attempt resumes after the tokens already streamed.
        sql::Stmt job(db(), "UPDATE jobs SET state = 'queued', queued_at = ?2 WHERE id = ?1");
        job.bind(1, l.job_id).bind(2, now_ms).step();
        report.requeued.push_back(l.job_id);
      }
    }
    std::vector<std::pair<std::string, std::string>> stuck;
    {
      sql::Stmt s(db(), "SELECT id, waiting FROM jobs WHERE state = 'queued' AND queued_at < ?1 ORDER BY id");
      s.bind(1, now_ms - options_.queue_timeout_ms);
      while (s.step()) stuck.emplace_back(s.text(0), s.text(1));
    }
    for (const auto& [id, waiting] : stuck) {
      fail_job(id,
               "no node took this job within " + std::to_string(options_.queue_timeout_ms / 1000) + " s" +
                   (waiting.empty() ? std::string() : "; at the last try: " + waiting),
               now_ms);
      report.failed.push_back(id);
    }
    return report;
  });
}

}  // namespace orchard::network
